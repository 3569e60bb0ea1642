// TANDEM_LAYER_NORM and TANDEM_MASKED_MEAN (see row_kernel_switches.h).
#include "kernels/cuda/row_kernel_switches.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<LayerNormKernel, 2> g_layer_norm{
    "TANDEM_LAYER_NORM", {{"one_row", LayerNormKernel::OneRow}, {"multi_row", LayerNormKernel::MultiRow}}};

constinit EnvSwitch<MaskedMeanKernel, 2> g_masked_mean{
    "TANDEM_MASKED_MEAN", {{"one_block", MaskedMeanKernel::OneBlock}, {"lane_groups", MaskedMeanKernel::LaneGroups}}};

}  // namespace

LayerNormKernel layer_norm_kernel() { return g_layer_norm.value(); }
LayerNormKernel parse_layer_norm_kernel(const char* v) { return g_layer_norm.parse(v); }
void set_layer_norm_kernel_for_testing(std::optional<LayerNormKernel> kernel) { g_layer_norm.force_for_testing(kernel); }
const char* layer_norm_kernel_name(LayerNormKernel kernel) { return g_layer_norm.name(kernel); }

MaskedMeanKernel masked_mean_kernel() { return g_masked_mean.value(); }
MaskedMeanKernel parse_masked_mean_kernel(const char* v) { return g_masked_mean.parse(v); }
void set_masked_mean_kernel_for_testing(std::optional<MaskedMeanKernel> kernel) {
  g_masked_mean.force_for_testing(kernel);
}
const char* masked_mean_kernel_name(MaskedMeanKernel kernel) { return g_masked_mean.name(kernel); }

}  // namespace tandem::kernels
