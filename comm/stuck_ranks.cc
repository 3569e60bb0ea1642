#include "comm/stuck_ranks.h"

#include <vector>

namespace tandem::comm {

std::string ranks_not_at_op(Store& store, const std::string& prefix, uint64_t seq, int rank, int size,
                            std::chrono::milliseconds window) {
  const std::string base = prefix + "stuck/" + std::to_string(seq) + "/";
  store.set(base + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(base + std::to_string(r));
  std::string ranks;
  for (const auto& k : store.wait(keys, window)) ranks += (ranks.empty() ? "" : ", ") + k.substr(base.size());
  return ranks;
}

}  // namespace tandem::comm
