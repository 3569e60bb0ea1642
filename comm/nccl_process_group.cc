#include "comm/nccl_process_group.h"

#include <atomic>
#include <cstring>

#include "comm/nccl_check.h"
#include "comm/stuck_ranks.h"
#include "core/cuda_check.h"
#include "core/stream.h"

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

// Shared by an op's two host callbacks and the watchdog. The watchdog frees
// it only after the end callback ran, so the callbacks never touch freed
// memory, and they never drop the last reference to a tensor (freeing device
// memory from a host callback is not allowed).
struct OpRecord {
  std::shared_ptr<Work> work;
  std::atomic<bool> ended{false};
};

void CUDART_CB on_start(void* p) { static_cast<OpRecord*>(p)->work->mark_started(); }
void CUDART_CB on_end(void* p) {
  auto* rec = static_cast<OpRecord*>(p);
  rec->work->mark_completed();
  rec->ended.store(true);
}

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    TANDEM_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) TANDEM_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

}  // namespace

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size, int device,
                                   ProcessGroupOptions options)
    : ProcessGroup(rank, size),
      store_(std::move(store)),
      options_(std::move(options)),
      prefix_("nccl/" + options_.group_name + "/"),
      device_(device) {
  DeviceScope scope(device_);
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
  DeviceScope scope(device_);
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

void NcclProcessGroup::wait_not_in_progress(Clock::time_point deadline, const std::string& what) {
  ncclResult_t state = ncclInProgress;
  for (;;) {
    TANDEM_NCCL_CHECK(ncclCommGetAsyncError(as_comm(comm_), &state));
    if (state != ncclInProgress) break;
    if (Clock::now() > deadline) {
      abort_locked(what + " did not finish within " + std::to_string(options_.timeout.count()) + " ms");
      TANDEM_FAIL("nccl: {}", broken_);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
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
  for (auto& f : in_flight_) f.work->mark_failed(broken_);
}

void NcclProcessGroup::check_device(const char* op, const Tensor& t) const {
  TANDEM_CHECK(t.device().is_cuda() && t.device().index == device_,
               "nccl {}: tensor {} must be on cuda:{}, this rank's device", op, t.str(), device_);
}

std::shared_ptr<Work> NcclProcessGroup::issue(const std::string& name, std::vector<Tensor> tensors, const Call& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(broken_.empty() && comm_ != nullptr, "nccl {}: the process group failed earlier: {}", name, broken_);
  DeviceScope scope(device_);
  cuda::Stream stream = cuda::current_stream(device_);
  for (const Tensor& t : tensors) t.storage()->record_stream(stream);
  auto s = static_cast<cudaStream_t>(stream.handle());
  const uint64_t seq = op_count_++;
  const std::string what = name + " #" + std::to_string(seq) + " on rank " + std::to_string(rank());
  auto record = std::make_shared<OpRecord>();
  record->work = std::make_shared<Work>(name, std::move(tensors));
  TANDEM_CUDA_CHECK(cudaLaunchHostFunc(s, on_start, record.get()));
  // From here the start callback points at `record`: it must be tracked even if the op fails.
  try {
    auto r = static_cast<ncclResult_t>(call(comm_, s));
    if (r == ncclInProgress) wait_not_in_progress(Clock::now() + options_.timeout, what);
    TANDEM_NCCL_CHECK(r);
  } catch (const std::exception& e) {
    (void)cudaLaunchHostFunc(s, on_end, record.get());
    record->work->mark_failed(e.what());
    in_flight_.push_back(InFlight{record, record->work, seq, Clock::now() + options_.timeout});
    throw;
  }
  TANDEM_CUDA_CHECK(cudaLaunchHostFunc(s, on_end, record.get()));
  in_flight_.push_back(InFlight{record, record->work, seq, Clock::now() + options_.timeout});
  cv_.notify_all();
  return record->work;
}

void NcclProcessGroup::watchdog() {
  auto next_store_check = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait_for(lock, std::chrono::milliseconds(in_flight_.empty() ? 100 : 2));
    // Ops whose end callback ran: drop their tensors here, on an ordinary thread.
    std::erase_if(in_flight_, [](InFlight& f) {
      if (!std::static_pointer_cast<OpRecord>(f.record)->ended.load()) return false;
      f.work->release_tensors();
      return true;
    });
    if (stopping_ && in_flight_.empty()) return;
    if (in_flight_.empty() || !comm_) {
      if (stopping_) {
        // Aborted ops whose callbacks have not run yet: their records must
        // outlive this group, since a callback may still fire.
        static auto* orphans = new std::vector<std::shared_ptr<void>>();
        static std::mutex orphans_mutex;
        std::lock_guard<std::mutex> guard(orphans_mutex);
        for (auto& f : in_flight_) {
          f.work->release_tensors();
          orphans->push_back(f.record);
        }
        in_flight_.clear();
        return;
      }
      continue;
    }
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(as_comm(comm_), &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress) {
      std::string why = std::string("NCCL reported ") + ncclGetErrorString(state) + " (" +
                        ncclGetLastError(as_comm(comm_)) + ") during " + in_flight_.front().work->op_name() +
                        " #" + std::to_string(in_flight_.front().seq) + "; a peer rank may have died";
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
    const InFlight& oldest = in_flight_.front();
    if (now > oldest.deadline && !oldest.work->is_finished()) {
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
