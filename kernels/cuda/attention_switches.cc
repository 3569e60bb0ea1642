// TANDEM_ATTENTION_FORWARD and TANDEM_ATTENTION_BACKWARD (see attention_switches.h).
#include "kernels/cuda/attention_switches.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<AttentionForwardKernel, 3> g_forward{"TANDEM_ATTENTION_FORWARD",
                                                          {{"tiled", AttentionForwardKernel::Tiled},
                                                           {"pipelined", AttentionForwardKernel::Pipelined},
                                                           {"pipelined_wide", AttentionForwardKernel::PipelinedWide}}};

constinit EnvSwitch<AttentionBackwardPath, 2> g_backward{
    "TANDEM_ATTENTION_BACKWARD", {{"split", AttentionBackwardPath::Split}, {"fused", AttentionBackwardPath::Fused}}};

}  // namespace

AttentionForwardKernel attention_forward_kernel() { return g_forward.value(); }
AttentionForwardKernel parse_attention_forward(const char* v) { return g_forward.parse(v); }
void set_attention_forward_for_testing(std::optional<AttentionForwardKernel> kernel) {
  g_forward.force_for_testing(kernel);
}

AttentionBackwardPath attention_backward_path() { return g_backward.value(); }
AttentionBackwardPath parse_attention_backward_path(const char* v) { return g_backward.parse(v); }
void set_attention_backward_path_for_testing(std::optional<AttentionBackwardPath> path) {
  g_backward.force_for_testing(path);
}
const char* attention_backward_path_name(AttentionBackwardPath path) { return g_backward.name(path); }

}  // namespace tandem::kernels
