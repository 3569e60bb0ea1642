#include "comm/nccl_process_group.h"

#include <atomic>
#include <cstring>

#include "comm/nccl_check.h"
#include "comm/stuck_ranks.h"
#include "core/cuda_check.h"
#include "core/cuda_graph.h"
#include "core/stream.h"

#include <thread>

namespace tandem::comm {

namespace {

using Clock = std::chrono::steady_clock;

ncclComm_t as_comm(void* p) { return static_cast<ncclComm_t>(p); }

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    default: TANDEM_FAIL("nccl: dtype {} is not supported", dtype_name(d));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}


}  // namespace

// The events are recorded on the op's stream around it; the Work keeps the
// op's tensors until the end event completed (the watchdog then drops them
// on an ordinary thread).
struct NcclProcessGroup::InFlight {
  std::shared_ptr<Work> work;
  cuda::Event start, end;
  bool started = false;
  uint64_t seq = 0;
  Clock::time_point deadline;
};

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size, int device,
                                   ProcessGroupOptions options)
    : ProcessGroup(rank, size),
      store_(std::move(store)),
      options_(std::move(options)),
      prefix_("nccl/" + options_.group_name + "/"),
      device_(device) {
  cuda::DeviceGuard scope(device_);
  ncclUniqueId id;
  const std::string key = prefix_ + "id";
  if (rank == 0) {
    TANDEM_NCCL_CHECK(ncclGetUniqueId(&id));
    store_->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    std::string bytes = store_->get(key, options_.timeout);
    TANDEM_CHECK(bytes.size() == sizeof id, "nccl: the unique id in the store has {} bytes, expected {}",
                 bytes.size(), sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so init and ops can be bounded and aborted
  ncclComm_t comm = nullptr;
  TANDEM_NCCL_CHECK(ncclCommInitRankConfig(&comm, size, id, rank, &config));
  comm_ = comm;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    wait_not_in_progress(Clock::now() + options_.timeout,
                         "nccl communicator init (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")");
  } catch (...) {
    if (comm_) ncclCommAbort(as_comm(comm_));
    throw;
  }
  watchdog_ = std::thread([this] { watchdog(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!comm_) return;
  cuda::DeviceGuard scope(device_);
  ncclResult_t r = ncclCommFinalize(as_comm(comm_));
  auto deadline = Clock::now() + std::min(options_.timeout, std::chrono::milliseconds(10000));
  ncclResult_t state = r;
  while (state == ncclInProgress && Clock::now() < deadline) {
    ncclCommGetAsyncError(as_comm(comm_), &state);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (state == ncclSuccess) ncclCommDestroy(as_comm(comm_));
  else ncclCommAbort(as_comm(comm_));
  comm_ = nullptr;
}

void NcclProcessGroup::wait_not_in_progress(Clock::time_point deadline, const std::string& what,
                                            std::unique_lock<std::mutex>* lock) {
  ncclResult_t state = ncclInProgress;
  for (;;) {
    TANDEM_CHECK(comm_ != nullptr, "nccl: {} was aborted: {}", what, broken_);
    TANDEM_NCCL_CHECK(ncclCommGetAsyncError(as_comm(comm_), &state));
    if (state != ncclInProgress) break;
    if (Clock::now() > deadline) {
      abort_locked(what + " did not finish within " + std::to_string(options_.timeout.count()) + " ms");
      TANDEM_FAIL("nccl: {}", broken_);
    }
    // Let the watchdog in: it may abort this communicator for a peer's failure.
    if (lock) lock->unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (lock) lock->lock();
  }
  if (state != ncclSuccess) {
    std::string why = what + " failed: " + ncclGetErrorString(state) + " (" + ncclGetLastError(as_comm(comm_)) + ")";
    abort_locked(why);
    TANDEM_FAIL("nccl: {}", why);
  }
}

void NcclProcessGroup::abort_locked(const std::string& why) {
  if (broken_.empty()) broken_ = "rank " + std::to_string(rank()) + ": " + why;
  if (comm_) {
    ncclCommAbort(as_comm(comm_));
    comm_ = nullptr;
  }
  for (auto& f : in_flight_) f->work->mark_failed(broken_);
}

void NcclProcessGroup::check_device(const char* op, const Tensor& t) const {
  TANDEM_CHECK(t.device().is_cuda() && t.device().index == device_,
               "nccl {}: tensor {} must be on cuda:{}, this rank's device", op, t.str(), device_);
}

std::shared_ptr<Work> NcclProcessGroup::issue(const std::string& name, std::vector<Tensor> tensors, const Call& call) {
  std::lock_guard<std::mutex> one_issue(issue_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  TANDEM_CHECK(broken_.empty() && comm_ != nullptr, "nccl {}: the process group failed earlier: {}", name, broken_);
  cuda::DeviceGuard scope(device_);
  cuda::Stream stream = cuda::current_stream(device_);
  for (const Tensor& t : tensors) t.storage()->record_stream(stream);
  auto s = static_cast<cudaStream_t>(stream.handle());
  if (cuda::is_capturing(stream)) {
    // Captured into a CUDA graph (train/graph_step.h): the call records the collective, which runs
    // at each replay. An event recorded during capture can never be queried, so the watchdog does
    // not track it (nor does it time out a replay); the Work completes now: callers order on the
    // stream (DeviceCompletion::OnDevice), and the graph's memory rules keep the tensors alive.
    auto work = std::make_shared<Work>(name, std::move(tensors));
    const std::string what = name + " (captured) on rank " + std::to_string(rank());
    issuing_ = true;  // the watchdog watches the store while this waits
    try {
      auto r = static_cast<ncclResult_t>(call(comm_, s));
      if (r == ncclInProgress) wait_not_in_progress(Clock::now() + options_.timeout, what, &lock);
      else TANDEM_NCCL_CHECK(r);
    } catch (...) {
      issuing_ = false;
      throw;
    }
    issuing_ = false;
    work->mark_started();
    work->mark_completed();
    work->release_tensors();
    return work;
  }
  std::unique_ptr<InFlight> op;
  if (spare_.empty()) {
    op = std::make_unique<InFlight>();
  } else {
    op = std::move(spare_.back());
    spare_.pop_back();
    op->started = false;
  }
  op->seq = op_count_++;
  op->work = std::make_shared<Work>(name, std::move(tensors));
  const std::string what = name + " #" + std::to_string(op->seq) + " on rank " + std::to_string(rank());
  op->start.record(stream);
  op->deadline = Clock::now() + options_.timeout;
  issuing_ = true;  // the watchdog watches the store while this waits
  try {
    auto r = static_cast<ncclResult_t>(call(comm_, s));
    if (r == ncclInProgress) wait_not_in_progress(op->deadline, what, &lock);
    else TANDEM_NCCL_CHECK(r);
    issuing_ = false;
    op->end.record(stream);
  } catch (const std::exception& e) {
    issuing_ = false;
    // The kernel may have reached the stream before the failure: the
    // tensors stay with the Work until the end event says the device is done.
    op->work->mark_failed(e.what());
    (void)cudaEventRecord(static_cast<cudaEvent_t>(op->end.handle()), s);
    in_flight_.push_back(std::move(op));
    throw;
  }
  std::shared_ptr<Work> work = op->work;
  in_flight_.push_back(std::move(op));
  cv_.notify_all();
  return work;
}

void NcclProcessGroup::poll_events() {
  // Events complete in stream order, but ops may sit on different streams: poll them all.
  // Erased after the loop, so that a query that throws leaves the list whole.
  const auto now = Clock::now();
  std::vector<bool> done(in_flight_.size(), false);
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    InFlight& f = *in_flight_[i];
    if (!f.started && f.start.query()) {
      f.started = true;
      f.work->mark_started(now);
    }
    if (!f.end.query()) continue;
    if (!f.started) f.work->mark_started(now);
    f.work->mark_completed(now);  // no effect on a Work that already failed
    f.work->release_tensors();
    done[i] = true;
  }
  // More spares than this are never needed at once: DDP has a few buckets in flight.
  constexpr size_t kMaxSpare = 64;
  size_t kept = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    if (!done[i]) {
      in_flight_[kept++] = std::move(in_flight_[i]);
    } else if (spare_.size() < kMaxSpare) {
      in_flight_[i]->work.reset();
      spare_.push_back(std::move(in_flight_[i]));
    }
  }
  in_flight_.resize(kept);
}

void NcclProcessGroup::watchdog() {
  // A CUDA call on a thread with no current device would make a context on GPU 0.
  try {
    cuda::set_device(device_);
  } catch (const std::exception&) {
  }
  auto next_store_check = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Short polls while ops are in flight: their completion is seen here.
    cv_.wait_for(lock, in_flight_.empty() ? std::chrono::microseconds(100000) : std::chrono::microseconds(50));
    try {
      poll_events();
    } catch (const std::exception& e) {
      // A sticky CUDA error (an illegal address in a kernel, say): no op on
      // this device can complete any more.
      abort_locked(std::string("CUDA error while waiting for ") + in_flight_.front()->work->op_name() + " #" +
                   std::to_string(in_flight_.front()->seq) + ": " + e.what());
      for (auto& f : in_flight_) f->work->release_tensors();
      in_flight_.clear();
    }
    if (stopping_ && in_flight_.empty()) return;
    if (!comm_) {
      if (stopping_) {
        // Aborted ops whose end event has not completed: keep their tensors
        // (and events) alive for the life of the process, since the device
        // may still touch that memory.
        static auto* orphans = new std::vector<std::unique_ptr<InFlight>>();
        static std::mutex orphans_mutex;
        std::lock_guard<std::mutex> guard(orphans_mutex);
        for (auto& f : in_flight_) orphans->push_back(std::move(f));
        in_flight_.clear();
        return;
      }
      continue;
    }
    if (in_flight_.empty() && !issuing_) continue;
    ncclResult_t state = ncclSuccess;
    if (!in_flight_.empty() && ncclCommGetAsyncError(as_comm(comm_), &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress) {
      std::string why = std::string("NCCL reported ") + ncclGetErrorString(state) + " (" +
                        ncclGetLastError(as_comm(comm_)) + ") during " + in_flight_.front()->work->op_name() +
                        " #" + std::to_string(in_flight_.front()->seq) + "; a peer rank may have died";
      abort_locked(why);
      lock.unlock();
      try {
        store_->compare_set(prefix_ + "abort", "", broken_);
      } catch (const std::exception&) {
      }
      lock.lock();
      continue;
    }
    auto now = Clock::now();
    if (!in_flight_.empty() && now > in_flight_.front()->deadline && !in_flight_.front()->work->is_finished()) {
      const InFlight& oldest = *in_flight_.front();
      std::string what = oldest.work->op_name() + " #" + std::to_string(oldest.seq);
      uint64_t seq = oldest.seq;
      lock.unlock();
      std::string missing;
      try {
        missing = ranks_not_at_op(*store_, prefix_, seq, rank(), size(),
                                  std::min(options_.timeout, std::chrono::milliseconds(2000)));
      } catch (const std::exception&) {
      }
      lock.lock();
      std::string why = what + " did not finish within " + std::to_string(options_.timeout.count()) +
                        " ms; the communicator was aborted" +
                        (missing.empty() ? "" : "; rank(s) " + missing + " did not reach this collective");
      abort_locked(why);
      lock.unlock();
      try {
        store_->compare_set(prefix_ + "abort", "", broken_);
      } catch (const std::exception&) {
      }
      lock.lock();
      continue;
    }
    if (now > next_store_check) {
      next_store_check = now + std::chrono::milliseconds(500);
      lock.unlock();
      bool peer_failed = false;
      try {
        peer_failed = store_->check({prefix_ + "abort"});
      } catch (const std::exception&) {
      }
      std::string first;
      if (peer_failed) {
        try {
          first = store_->get(prefix_ + "abort", std::chrono::milliseconds(1000));
        } catch (const std::exception&) {
        }
      }
      lock.lock();
      if (peer_failed && comm_) abort_locked("another rank failed first: " + first);
    }
  }
}

// --- ops ---------------------------------------------------------------------------

std::shared_ptr<Work> NcclProcessGroup::all_reduce(Tensor& t, ReduceOp op) { return all_reduce(t, t, op); }

std::shared_ptr<Work> NcclProcessGroup::all_reduce(const Tensor& in, Tensor& out, ReduceOp op) {
  check_all_reduce(in, out);
  check_device("all_reduce", in);
  return issue("all_reduce", {in, out}, [&](void* comm, void* stream) {
    return static_cast<int>(ncclAllReduce(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()),
                                          nccl_type(in.dtype()), nccl_op(op), as_comm(comm),
                                          static_cast<cudaStream_t>(stream)));
  });
}

std::shared_ptr<Work> NcclProcessGroup::broadcast(Tensor& t, int root) {
  check_broadcast(t, root);
  check_device("broadcast", t);
  return issue("broadcast", {t}, [&](void* comm, void* stream) {
    return static_cast<int>(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                                          nccl_type(t.dtype()), root, as_comm(comm),
                                          static_cast<cudaStream_t>(stream)));
  });
}

std::shared_ptr<Work> NcclProcessGroup::all_gather(const Tensor& in, Tensor& out) {
  check_all_gather(in, out);
  check_device("all_gather", in);
  return issue("all_gather", {in, out}, [&](void* comm, void* stream) {
    return static_cast<int>(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()),
                                          nccl_type(in.dtype()), as_comm(comm), static_cast<cudaStream_t>(stream)));
  });
}

std::shared_ptr<Work> NcclProcessGroup::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  check_reduce_scatter(in, out);
  check_device("reduce_scatter", in);
  return issue("reduce_scatter", {in, out}, [&](void* comm, void* stream) {
    return static_cast<int>(ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                                              nccl_type(in.dtype()), nccl_op(op), as_comm(comm),
                                              static_cast<cudaStream_t>(stream)));
  });
}

std::shared_ptr<Work> NcclProcessGroup::barrier() {
  Tensor token = Tensor::full({1}, 1.0, DType::F32, Device::cuda(device_));
  return all_reduce(token, ReduceOp::Sum);
}

}  // namespace tandem::comm
