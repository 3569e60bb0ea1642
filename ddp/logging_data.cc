#include "ddp/logging_data.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

extern char** environ;

namespace tandem::ddp {

std::string to_json(const LoggingData& d) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : d.environment) env[k] = v;
  const nlohmann::json j = {{"backend", d.backend},
                            {"transport", d.transport},
                            {"shared_buffers", d.shared_buffers},
                            {"single_copy", d.single_copy},
                            {"world_size", d.world_size},
                            {"rank", d.rank},
                            {"device", d.device},
                            {"num_parameter_tensors", d.num_parameter_tensors},
                            {"parameter_bytes", d.parameter_bytes},
                            {"dtypes", d.dtypes},
                            {"bucket_cap_mb", d.bucket_cap_mb},
                            {"first_bucket_cap_mb", d.first_bucket_cap_mb},
                            {"gradient_as_bucket_view", d.gradient_as_bucket_view},
                            {"find_unused_parameters", d.find_unused_parameters},
                            {"static_graph", d.static_graph},
                            {"comm_hook", d.comm_hook},
                            {"timeout_ms", d.timeout_ms},
                            {"bucket_sizes", d.bucket_sizes},
                            {"has_rebuilt_buckets", d.has_rebuilt_buckets},
                            {"rebuilt_bucket_sizes", d.rebuilt_bucket_sizes},
                            {"iterations", d.iterations},
                            {"environment", env}};
  return j.dump();
}

std::vector<std::pair<std::string, std::string>> distributed_environment() {
  // What decides rendezvous, rank placement, threads and NCCL's transport choices.
  constexpr std::string_view kPrefixes[] = {"NCCL_", "TANDEM_", "MASTER_", "TORCHELASTIC_"};
  constexpr std::string_view kNames[] = {"RANK",       "WORLD_SIZE",           "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"};
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    const bool wanted = std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                    [&](std::string_view p) { return name.substr(0, p.size()) == p; }) ||
                        std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
    if (wanted) out.emplace_back(std::string(name), std::string(entry.substr(eq + 1)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tandem::ddp
