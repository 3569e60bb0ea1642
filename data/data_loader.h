// DataLoader: batches of token ids, masks and labels for one rank, built by
// worker threads ahead of the training loop.
//
// Guarantees:
//   - Order: batch k of an epoch holds rows k*B .. k*B+B-1 of the sampler's
//     shard, whatever num_workers is; workers only decide who builds a batch,
//     next() hands batches out strictly in order.
//   - Bounded prefetch: at most num_workers * prefetch_factor batches are
//     built or being built ahead of the consumer.
//   - Persistent workers: threads start with the loader and serve every epoch.
//   - Length: with Padding::MaxLength every batch is [b, S], S the source's
//     seq_len; with Padding::Longest it is [b, L], L the batch's longest row
//     rounded up to pad_to_multiple_of (data/batch_padding.h), cut from the
//     same rows in the staging buffer before any copy.
//   - Memory: rows are built into reusable host staging buffers (pinned when
//     pin_memory and a GPU is present; ordinary memory otherwise). For a CUDA
//     device the worker queues the host-to-device copy on the loader's own
//     copy stream and records an event; next() makes the caller's current
//     stream wait for that event (no host synchronisation) and records the
//     batch's memory as used by that stream. A staging buffer is refilled
//     only after its copy has finished. For the CPU device the batch tensors
//     are the staging buffers; a buffer still referenced by the caller is never
//     overwritten (a fresh one replaces it in the pool).
//   - Failure: an exception in a worker reaches the caller from next() when it
//     gets to that batch, as tandem::Error with the worker, batch and original
//     message; the epoch is then over. Stopping early (a new start_epoch, or
//     destroying the loader) never hangs: workers finish at most the batch in
//     hand. Every wait is bounded by timeout_seconds.
//   - Profiling: each batch records how long next() blocked for it, which
//     worker built it and when (host steady_clock), and, with time_copies on
//     a CUDA device, CUDA timing events around its host-to-device copy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "data/batch_padding.h"
#include "data/batch_source.h"
#include "data/distributed_sampler.h"

namespace tandem::data {

struct DataLoaderOptions {
  int64_t batch_size = 32;
  int num_workers = 0;      // 0: next() builds each batch in the caller's thread
  int prefetch_factor = 2;  // batches per worker allowed ahead of the consumer
  bool pin_memory = true;   // page-locked staging buffers (only pays for a CUDA device)
  bool drop_last = false;   // drop a final batch smaller than batch_size
  Device device = Device::cpu();
  DType ids_dtype = DType::I64;  // I32 or I64
  double timeout_seconds = 300;  // the longest any wait inside the loader may take
  bool time_copies = false;      // CUDA device: record Batch::copy_start/copy_end (the step profiler's h2d)
  Padding padding = Padding::MaxLength;
  int64_t pad_to_multiple_of = 1;  // Padding::Longest: the length is a multiple of this (or S)
};

struct Batch {
  Tensor ids;                    // [b, L] ids_dtype, on the loader's device (L = S unless Padding::Longest)
  Tensor mask;                   // [b, L] U8, nonzero = real token
  Tensor labels;                 // [b] I64
  std::vector<int64_t> indices;  // the dataset index of each row
  int64_t epoch = 0;
  int64_t index = 0;          // k: the batch's number in its epoch (counting from the resume point)
  double wait_seconds = 0.0;  // how long next() blocked for this batch
  int worker = -1;            // the worker thread that built it; -1: next() built it in the caller's thread
  std::chrono::steady_clock::time_point build_start{}, build_end{};  // building it, copy queued included
  std::shared_ptr<const cuda::Event> copy_start, copy_end;  // time_copies: on the copy stream around the copy
};

struct LoaderEpochStats {
  int64_t batches = 0;
  double wait_seconds = 0.0;      // total time next() blocked this epoch
  double max_wait_seconds = 0.0;  // the longest single wait
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const BatchSource> source, DistributedSampler sampler, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts (or restarts, cancelling the current one) an epoch from the beginning of its shard.
  void start_epoch(int64_t epoch);
  // Starts state.epoch after the state.position samples already consumed (from state() of an earlier run).
  void resume(const SamplerState& state);
  // The next batch of the epoch, or nullopt when the epoch is over (or none was started).
  std::optional<Batch> next();

  int64_t num_batches() const;  // batches in a full epoch
  SamplerState state() const;   // epoch and samples handed out so far, for checkpoints
  LoaderEpochStats epoch_stats() const;
  const DistributedSampler& sampler() const { return sampler_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  struct Slot;
  struct Result;

  void start_locked(std::unique_lock<std::mutex>& lock, int64_t epoch, int64_t position);
  void cancel_locked(std::unique_lock<std::mutex>& lock);
  void worker_main(int worker);
  Result produce(int64_t k, const std::vector<int64_t>& order, int64_t epoch, int worker);
  void prepare_staging(Slot& slot);
  int64_t batches_for(int64_t samples) const;

  std::shared_ptr<const BatchSource> source_;
  DistributedSampler sampler_;
  DataLoaderOptions options_;
  int64_t capacity_ = 1;  // batches allowed ahead of the consumer
  cuda::Stream copy_stream_;
  std::vector<std::unique_ptr<Slot>> slots_;      // staging buffers, batch k uses slot k % size
  std::vector<std::unique_ptr<Result>> results_;  // finished batches waiting for next(), same indexing

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // workers wait for a batch to build
  std::condition_variable done_cv_;  // next() waits for a result, cancel waits for idle workers
  bool stop_ = false;
  bool active_ = false;
  uint64_t generation_ = 0;                            // bumped by every start and cancel; stale results are dropped
  std::shared_ptr<const std::vector<int64_t>> order_;  // this epoch's remaining shard
  int64_t epoch_ = 0;
  int64_t start_position_ = 0;
  int64_t num_batches_ = 0;
  int64_t next_task_ = 0;
  int64_t consumed_ = 0;
  int busy_ = 0;  // workers building a batch
  LoaderEpochStats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace tandem::data
