// The TANDEM_ATTENTION_BACKWARD switch (kernels/cuda/attention_cuda.h).
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "kernels/cuda/attention_cuda.h"

namespace tandem::kernels {

namespace {

std::optional<AttentionBackwardPath> g_forced;

}  // namespace

AttentionBackwardPath parse_attention_backward_path(const char* v) {
  if (!v || !*v || std::string(v) == "split") return AttentionBackwardPath::Split;
  TANDEM_CHECK(std::string(v) == "fused", "TANDEM_ATTENTION_BACKWARD must be split or fused, got '{}'", v);
  return AttentionBackwardPath::Fused;
}

AttentionBackwardPath attention_backward_path() {
  if (g_forced) return *g_forced;
  static const AttentionBackwardPath path = parse_attention_backward_path(std::getenv("TANDEM_ATTENTION_BACKWARD"));
  return path;
}

void set_attention_backward_path_for_testing(std::optional<AttentionBackwardPath> path) { g_forced = path; }

const char* attention_backward_path_name(AttentionBackwardPath path) {
  return path == AttentionBackwardPath::Fused ? "fused" : "split";
}

}  // namespace tandem::kernels
