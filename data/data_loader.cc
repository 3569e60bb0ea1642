#include "data/data_loader.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "core/check.h"
#include "core/elapsed.h"

namespace tandem::data {

namespace {

using Clock = std::chrono::steady_clock;

// Polls instead of cudaEventSynchronize so the wait has a deadline.
bool wait_event(const cuda::Event& event, double timeout_seconds) {
  const auto deadline = Clock::now() + seconds_as_duration(timeout_seconds);
  while (!event.query()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

// Makes `device` current for a scope (a no-op for the CPU).
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) {
    if (!device.is_cuda()) return;
    previous_ = cuda::current_device();
    if (previous_ != device.index) cuda::set_device(device.index);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) {
      try {
        cuda::set_device(previous_);
      } catch (...) {  // a broken context is reported by the next checked call
      }
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

bool referenced_elsewhere(const Tensor& t) { return t.defined() && t.storage().use_count() > 1; }

}  // namespace

struct DataLoader::Slot {
  Tensor ids, mask, labels;             // host staging for a full batch
  std::unique_ptr<cuda::Event> copied;  // CUDA device: recorded after the copy out of this slot
  bool copy_pending = false;
};

struct DataLoader::Result {
  int64_t k = -1;  // the batch this holds; -1 = empty
  Batch batch;
  std::exception_ptr error;
};

DataLoader::DataLoader(std::shared_ptr<const BatchSource> source, DistributedSampler sampler, DataLoaderOptions options)
    : source_(std::move(source)), sampler_(std::move(sampler)), options_(options) {
  TANDEM_CHECK(source_, "DataLoader needs a batch source");
  TANDEM_CHECK(source_->size() == sampler_.dataset_size(),
               "DataLoader: the sampler covers {} examples but the source has {}", sampler_.dataset_size(),
               source_->size());
  TANDEM_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be at least 1, got {}", options_.batch_size);
  TANDEM_CHECK(options_.num_workers >= 0 && options_.num_workers <= 256,
               "DataLoader: num_workers must be in [0, 256], got {}", options_.num_workers);
  TANDEM_CHECK(options_.prefetch_factor >= 1, "DataLoader: prefetch_factor must be at least 1, got {}",
               options_.prefetch_factor);
  TANDEM_CHECK(options_.timeout_seconds > 0, "DataLoader: timeout_seconds must be positive, got {}",
               options_.timeout_seconds);
  TANDEM_CHECK(options_.pad_to_multiple_of >= 1, "DataLoader: pad_to_multiple_of must be at least 1, got {}",
               options_.pad_to_multiple_of);
  TANDEM_CHECK(options_.ids_dtype == DType::I32 || options_.ids_dtype == DType::I64,
               "DataLoader: ids_dtype must be i32 or i64, not {}", dtype_name(options_.ids_dtype));
  if (options_.device.is_cuda()) {
    TANDEM_CHECK(options_.device.index >= 0 && options_.device.index < cuda::device_count(),
                 "DataLoader: device {} is not available ({} CUDA device(s) present)", options_.device.str(),
                 cuda::device_count());
  }

  capacity_ = options_.num_workers == 0 ? 1 : int64_t{options_.num_workers} * options_.prefetch_factor;
  // Batches in flight use capacity_ slots; one more holds the batch the caller is using and one the
  // batch it used before, so in steady state no buffer is still referenced when its turn comes again.
  const int64_t pool = capacity_ + 2;
  DeviceGuard guard(options_.device);
  if (options_.device.is_cuda()) copy_stream_ = cuda::Stream::create(options_.device.index);
  for (int64_t i = 0; i < pool; ++i) {
    auto slot = std::make_unique<Slot>();
    if (options_.device.is_cuda()) slot->copied = std::make_unique<cuda::Event>();
    slots_.push_back(std::move(slot));
    results_.push_back(std::make_unique<Result>());
  }
  for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this, w] { worker_main(w); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    active_ = false;
    ++generation_;
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  for (auto& t : workers_) t.join();
  // Staging buffers may still be the source of queued copies: let those finish before freeing them.
  for (auto& slot : slots_) {
    if (slot->copy_pending) {
      try {
        (void)wait_event(*slot->copied, options_.timeout_seconds);
      } catch (...) {  // destructors must not throw; a broken context is reported elsewhere
      }
    }
  }
}

int64_t DataLoader::batches_for(int64_t samples) const {
  return options_.drop_last ? samples / options_.batch_size : (samples + options_.batch_size - 1) / options_.batch_size;
}

int64_t DataLoader::num_batches() const { return batches_for(sampler_.num_samples()); }

void DataLoader::start_epoch(int64_t epoch) {
  std::unique_lock<std::mutex> lock(mutex_);
  start_locked(lock, epoch, 0);
}

void DataLoader::resume(const SamplerState& state) {
  std::unique_lock<std::mutex> lock(mutex_);
  sampler_.load_state(state);  // validates world size, dataset size, seed and position
  start_locked(lock, state.epoch, state.position);
}

void DataLoader::cancel_locked(std::unique_lock<std::mutex>& lock) {
  ++generation_;
  active_ = false;
  for (auto& r : results_) *r = Result{};
  // A worker still building a batch of the old run writes into a staging slot the new run will use.
  if (!done_cv_.wait_for(lock, seconds_as_duration(options_.timeout_seconds), [&] { return busy_ == 0; }))
    TANDEM_FAIL("data loader: a worker did not finish its batch within {} s after the epoch was stopped",
                options_.timeout_seconds);
}

void DataLoader::start_locked(std::unique_lock<std::mutex>& lock, int64_t epoch, int64_t position) {
  cancel_locked(lock);
  sampler_.set_epoch(epoch);
  sampler_.set_position(position);
  std::vector<int64_t> shard = sampler_.indices();
  order_ = std::make_shared<const std::vector<int64_t>>(shard.begin() + position, shard.end());
  epoch_ = epoch;
  start_position_ = position;
  num_batches_ = batches_for(static_cast<int64_t>(order_->size()));
  next_task_ = 0;
  consumed_ = 0;
  stats_ = {};
  active_ = true;
  work_cv_.notify_all();
}

SamplerState DataLoader::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SamplerState s = sampler_.state();
  s.epoch = epoch_;
  const int64_t handed_out =
      order_ ? std::min<int64_t>(consumed_ * options_.batch_size, static_cast<int64_t>(order_->size())) : 0;
  s.position = start_position_ + handed_out;
  return s;
}

LoaderEpochStats DataLoader::epoch_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DataLoader::prepare_staging(Slot& slot) {
  if (slot.copy_pending) {
    if (!wait_event(*slot.copied, options_.timeout_seconds))
      TANDEM_FAIL("data loader: a host-to-device batch copy did not finish within {} s", options_.timeout_seconds);
    slot.copy_pending = false;
  }
  // For the CPU device the caller's batch tensors are the staging buffers: never overwrite one it
  // still holds. use_count() is a relaxed read; the fence pairs it with the release of the
  // caller's last reference, so its reads of the old contents happen before our writes.
  const bool in_use =
      referenced_elsewhere(slot.ids) || referenced_elsewhere(slot.mask) || referenced_elsewhere(slot.labels);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.ids.defined() && !in_use) return;
  const int64_t b = options_.batch_size, s = source_->seq_len();
  slot.ids = Tensor::empty({b, s}, options_.ids_dtype, Device::cpu(), options_.pin_memory);
  slot.mask = Tensor::empty({b, s}, DType::U8, Device::cpu(), options_.pin_memory);
  slot.labels = Tensor::empty({b}, DType::I64, Device::cpu(), options_.pin_memory);
}

DataLoader::Result DataLoader::produce(int64_t k, const std::vector<int64_t>& order, int64_t epoch, int worker) {
  Result r;
  r.k = k;
  r.batch.worker = worker;
  r.batch.build_start = Clock::now();
  try {
    const int64_t first = k * options_.batch_size;
    const int64_t rows = std::min<int64_t>(options_.batch_size, static_cast<int64_t>(order.size()) - first);
    Slot& slot = *slots_[static_cast<size_t>(k) % slots_.size()];
    prepare_staging(slot);
    r.batch.indices.assign(order.begin() + first, order.begin() + first + rows);
    source_->fill(r.batch.indices, BatchBuffers{slot.ids.data_ptr(), options_.ids_dtype, slot.mask.data<uint8_t>(),
                                                slot.labels.data<int64_t>()});
    const int64_t seq = source_->seq_len();
    int64_t length = seq;
    if (options_.padding == Padding::Longest)
      length = cut_to_longest(slot.ids.data_ptr(), dtype_size(options_.ids_dtype), slot.mask.data<uint8_t>(), rows,
                              seq, options_.pad_to_multiple_of);
    Tensor ids = slot.ids.view_range(0, {rows, length}), mask = slot.mask.view_range(0, {rows, length});
    Tensor labels = slot.labels.narrow(0, rows);
    if (options_.device.is_cuda()) {
      DeviceGuard device(options_.device);
      cuda::StreamGuard stream(copy_stream_);
      if (options_.time_copies) {
        auto start = std::make_shared<cuda::Event>(/*enable_timing=*/true);
        start->record(copy_stream_);
        r.batch.copy_start = std::move(start);
      }
      // Allocated on the copy stream; asynchronous when the staging buffers are pinned.
      r.batch.ids = ids.to(options_.device);
      r.batch.mask = mask.to(options_.device);
      r.batch.labels = labels.to(options_.device);
      if (options_.time_copies) {
        auto end = std::make_shared<cuda::Event>(/*enable_timing=*/true);
        end->record(copy_stream_);
        r.batch.copy_end = std::move(end);
      }
      slot.copied->record(copy_stream_);
      slot.copy_pending = true;
    } else {
      r.batch.ids = ids;
      r.batch.mask = mask;
      r.batch.labels = labels;
    }
    r.batch.epoch = epoch;
    r.batch.index = k;
    r.batch.build_end = Clock::now();
  } catch (const std::exception& e) {
    std::string who = worker >= 0 ? fmt::format("data loader worker {}", worker) : std::string("data loader");
    r.error = std::make_exception_ptr(Error(fmt::format("{}: batch {} of epoch {}: {}", who, k, epoch, e.what())));
  } catch (...) {
    r.error =
        std::make_exception_ptr(Error(fmt::format("data loader: batch {} of epoch {}: unknown exception", k, epoch)));
  }
  return r;
}

void DataLoader::worker_main(int worker) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), fmt::format("tandem-data-{}", worker).substr(0, 15).c_str());
#endif
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(
        lock, [&] { return stop_ || (active_ && next_task_ < num_batches_ && next_task_ < consumed_ + capacity_); });
    if (stop_) return;
    const int64_t k = next_task_++;
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    std::shared_ptr<const std::vector<int64_t>> order = order_;
    ++busy_;
    lock.unlock();
    Result r = produce(k, *order, epoch, worker);
    lock.lock();
    --busy_;
    if (generation == generation_) *results_[static_cast<size_t>(k) % results_.size()] = std::move(r);
    done_cv_.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!active_) return std::nullopt;
  if (consumed_ >= num_batches_) {
    active_ = false;
    return std::nullopt;
  }
  const int64_t k = consumed_;
  Result r;
  if (workers_.empty()) {
    std::shared_ptr<const std::vector<int64_t>> order = order_;
    const int64_t epoch = epoch_;
    lock.unlock();
    DeviceGuard device(options_.device);
    r = produce(k, *order, epoch, -1);
    lock.lock();
  } else {
    Result& slot = *results_[static_cast<size_t>(k) % results_.size()];
    const bool ready =
        done_cv_.wait_for(lock, seconds_as_duration(options_.timeout_seconds), [&] { return slot.k == k || stop_; });
    if (!ready || stop_) {
      ++generation_;
      active_ = false;
      TANDEM_FAIL(
          "data loader: batch {} of epoch {} was not ready within {} s ({} workers): a worker is stuck or "
          "the source is far too slow",
          k, epoch_, options_.timeout_seconds, workers_.size());
    }
    r = std::move(slot);
    slot = Result{};
  }
  const double waited = seconds_since(t0);
  if (r.error) {
    // The epoch ends here; workers drop what they are still building.
    ++generation_;
    active_ = false;
    for (auto& res : results_) *res = Result{};
    work_cv_.notify_all();
    std::rethrow_exception(r.error);
  }
  if (options_.device.is_cuda()) {
    // The caller's stream waits on the device for the copy; the host does not.
    cuda::Stream compute = cuda::current_stream(options_.device.index);
    slots_[static_cast<size_t>(k) % slots_.size()]->copied->block(compute);
    for (const Tensor* t : {&r.batch.ids, &r.batch.mask, &r.batch.labels}) t->storage()->record_stream(compute);
  }
  ++consumed_;
  stats_.batches += 1;
  stats_.wait_seconds += waited;
  stats_.max_wait_seconds = std::max(stats_.max_wait_seconds, waited);
  work_cv_.notify_all();
  r.batch.wait_seconds = waited;
  return std::move(r.batch);
}

}  // namespace tandem::data
