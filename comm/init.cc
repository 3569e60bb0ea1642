#include "comm/init.h"

#include <set>

#include "comm/debug_level.h"
#include "comm/debug_process_group.h"
#include "comm/ring_process_group.h"
#include "core/check.h"
#include "core/stream.h"

#if TANDEM_WITH_NCCL
#include <nccl.h>

#include "comm/nccl_process_group.h"
#endif

namespace tandem::comm {

std::string nccl_version() {
#if TANDEM_WITH_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
#else
  return "";
#endif
}

int device_for_local_rank(int local_rank, int device_count) {
  return device_count > 0 ? local_rank % device_count : -1;
}

int device_for_local_rank(int local_rank) { return device_for_local_rank(local_rank, cuda::device_count()); }

std::string choose_backend(const std::vector<std::string>& gpu_of_rank) {
  std::set<std::string> distinct;
  for (const std::string& gpu : gpu_of_rank) {
    if (gpu.empty() || !distinct.insert(gpu).second) return "ring";  // no GPU, or a GPU shared with another rank
  }
  return "nccl";
}

std::shared_ptr<Store> connect_store(const RankInfo& info, std::chrono::milliseconds timeout) {
  StoreOptions so;
  so.timeout = timeout;
  so.token = info.store_token;
  if (info.world_size == 1 && !info.store_hosted_externally) return Store::host("127.0.0.1", 0, so);
  if (info.rank == 0 && !info.store_hosted_externally) return Store::host(info.master_addr, info.store_port, so);
  return std::make_shared<Store>(info.master_addr, info.store_port, so);
}

namespace {
std::string choose_auto(Store& store, const RankInfo& info, const ProcessGroupOptions& options) {
  const std::string prefix = "auto/" + options.group_name + "/";
  const int device = device_for_local_rank(info.local_rank);
  // "-" for no GPU or no NCCL: the store keeps values, and an empty one reads as missing in some stores.
  store.set(prefix + std::to_string(info.rank), !nccl_version().empty() && device >= 0 ? cuda::device_uuid(device) : "-");
  std::vector<std::string> keys;
  for (int r = 0; r < info.world_size; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<std::string> missing = store.wait(keys, options.timeout);
  TANDEM_CHECK(missing.empty(), "backend 'auto': {} rank(s) did not report within {} ms (first missing: {})",
               missing.size(), options.timeout.count(), missing.empty() ? "" : missing[0]);
  std::vector<std::string> gpus;
  for (const auto& k : keys) {
    std::string v = store.get(k);
    gpus.push_back(v == "-" ? "" : v);
  }
  return choose_backend(gpus);
}
}  // namespace

std::shared_ptr<ProcessGroup> make_process_group(const std::string& backend, std::shared_ptr<Store> store,
                                                 const RankInfo& info, ProcessGroupOptions options) {
  TANDEM_CHECK(backend == "ring" || backend == "nccl" || backend == "auto",
               "unknown process group backend '{}' (ring, nccl, auto)", backend);
  // Read first, so that a malformed debug variable fails before any rendezvous.
  const bool debug = distributed_debug_level() == DebugLevel::Detail;
  std::string chosen = backend == "auto" ? choose_auto(*store, info, options) : backend;
  std::shared_ptr<ProcessGroup> pg;
  if (chosen == "ring") {
    pg = std::make_shared<RingProcessGroup>(store, info.rank, info.world_size, options);
  } else {
#if TANDEM_WITH_NCCL
    const int device = device_for_local_rank(info.local_rank);
    TANDEM_CHECK(device >= 0, "backend 'nccl': rank {} has no CUDA device (use 'ring')", info.rank);
    pg = std::make_shared<NcclProcessGroup>(store, info.rank, info.world_size, device, options);
#else
    TANDEM_FAIL("backend 'nccl': Tandem was built without {} (use 'ring'{})",
                cuda::built_with_cuda() ? "NCCL" : "CUDA",
                cuda::built_with_cuda() ? ", or rebuild with NCCL_ROOT pointing at an NCCL install" : "");
#endif
  }
  if (debug) return std::make_shared<DebugProcessGroup>(std::move(pg), std::move(store), std::move(options));
  return pg;
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, const RankInfo& info,
                                                 ProcessGroupOptions options) {
  return make_process_group(backend, connect_store(info, options.timeout), info, std::move(options));
}

}  // namespace tandem::comm
