// LoggingData: how one DistributedDataParallel instance is set up and what it
// built, as PyTorch records in `ddp_logging_data` (DDP._get_ddp_logging_data()):
// the backend and world, the options, the buckets as first built (reverse
// registration order) and after the rebuild in gradient-ready order, and the
// environment variables that change how ranks find each other and communicate.
// The trainer writes it to metrics.jsonl (kind "ddp") when DDP is built and
// again when training ends, so a run's record says which bucket layout it ran with.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem::ddp {

struct LoggingData {
  std::string backend;
  std::string transport;                  // how the backend moves bytes (ring: "shm", "tcp", ...); "" if it has one way
  std::string shared_buffers;             // whether buckets are reduced in place (ring: "from 0 bytes", "off: ...")
  std::string single_copy;                // whether all_reduce reads peers' buffers (ring: "from 2097152 bytes", "off: ...")
  int world_size = 1;
  int rank = 0;
  std::string device;                     // of the parameters: "cpu" or "cuda:N"
  int64_t num_parameter_tensors = 0;
  int64_t parameter_bytes = 0;
  std::vector<std::string> dtypes;        // of the parameters, distinct, sorted
  double bucket_cap_mb = 0;
  double first_bucket_cap_mb = 0;
  bool gradient_as_bucket_view = false;
  bool find_unused_parameters = false;
  bool static_graph = false;
  std::string comm_hook;                  // "allreduce" (none) or the hook's name
  int64_t timeout_ms = 0;
  std::vector<int64_t> bucket_sizes;      // bytes per bucket, as built at construction
  bool has_rebuilt_buckets = false;
  std::vector<int64_t> rebuilt_bucket_sizes;  // bytes per bucket after the rebuild (empty before it)
  int64_t iterations = 0;                 // synchronised iterations so far
  std::vector<std::pair<std::string, std::string>> environment;  // NCCL_*, TANDEM_*, MASTER_*, ... sorted
};

// As one JSON object (the keys are the field names above; environment as an object).
std::string to_json(const LoggingData& d);

// The environment variables worth recording for a distributed run, sorted by name.
std::vector<std::pair<std::string, std::string>> distributed_environment();

}  // namespace tandem::ddp
