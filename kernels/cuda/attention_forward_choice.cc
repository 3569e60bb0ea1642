// TANDEM_ATTENTION_FORWARD (see attention_forward_choice.h).
#include "kernels/cuda/attention_forward_choice.h"

#include <cstdlib>
#include <string>

#include "core/check.h"

namespace tandem::kernels {

namespace {

std::optional<AttentionForwardKernel> g_forced;

}  // namespace

AttentionForwardKernel parse_attention_forward(const char* v) {
  if (!v || !*v || std::string(v) == "tiled") return AttentionForwardKernel::Tiled;
  TANDEM_CHECK(std::string(v) == "pipelined", "TANDEM_ATTENTION_FORWARD must be tiled or pipelined, got '{}'", v);
  return AttentionForwardKernel::Pipelined;
}

AttentionForwardKernel attention_forward_kernel() {
  if (g_forced) return *g_forced;
  static const AttentionForwardKernel kernel = parse_attention_forward(std::getenv("TANDEM_ATTENTION_FORWARD"));
  return kernel;
}

void set_attention_forward_for_testing(std::optional<AttentionForwardKernel> kernel) { g_forced = kernel; }

}  // namespace tandem::kernels
