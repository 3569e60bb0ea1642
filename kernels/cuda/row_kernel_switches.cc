// TANDEM_LAYER_NORM, TANDEM_MASKED_MEAN, TANDEM_DROPOUT_BACKWARD, TANDEM_COLUMN_SUM,
// TANDEM_GELU_DROPOUT, TANDEM_ADD_LAYER_NORM, TANDEM_EMBEDDING_BACKWARD and TANDEM_DROPOUT_KEEP
// (see row_kernel_switches.h).
#include "kernels/cuda/row_kernel_switches.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<LayerNormKernel, 3> g_layer_norm{
    "TANDEM_LAYER_NORM",
    {{"one_row", LayerNormKernel::OneRow}, {"multi_row", LayerNormKernel::MultiRow}, {"lanes", LayerNormKernel::Lanes}}};

constinit EnvSwitch<MaskedMeanKernel, 2> g_masked_mean{
    "TANDEM_MASKED_MEAN", {{"one_block", MaskedMeanKernel::OneBlock}, {"lane_groups", MaskedMeanKernel::LaneGroups}}};

constinit EnvSwitch<DropoutBackwardKernel, 2> g_dropout_backward{
    "TANDEM_DROPOUT_BACKWARD", {{"flat", DropoutBackwardKernel::Flat}, {"batched", DropoutBackwardKernel::Batched}}};

constinit EnvSwitch<ColumnSumKernel, 2> g_column_sum{
    "TANDEM_COLUMN_SUM", {{"thread", ColumnSumKernel::Thread}, {"block", ColumnSumKernel::Block}}};

constinit EnvSwitch<GeluDropoutKernel, 2> g_gelu_dropout{
    "TANDEM_GELU_DROPOUT", {{"fused", GeluDropoutKernel::Fused}, {"separate", GeluDropoutKernel::Separate}}};

constinit EnvSwitch<AddLayerNormKernel, 2> g_add_layer_norm{
    "TANDEM_ADD_LAYER_NORM", {{"fused", AddLayerNormKernel::Fused}, {"separate", AddLayerNormKernel::Separate}}};

constinit EnvSwitch<EmbeddingBackwardKernel, 2> g_embedding_backward{
    "TANDEM_EMBEDDING_BACKWARD",
    {{"windows", EmbeddingBackwardKernel::Windows}, {"pieces", EmbeddingBackwardKernel::Pieces}}};

constinit EnvSwitch<DropoutKeep, 2> g_dropout_keep{
    "TANDEM_DROPOUT_KEEP", {{"recompute", DropoutKeep::Recompute}, {"saved", DropoutKeep::Saved}}};

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

DropoutBackwardKernel dropout_backward_kernel() { return g_dropout_backward.value(); }
DropoutBackwardKernel parse_dropout_backward_kernel(const char* v) { return g_dropout_backward.parse(v); }
void set_dropout_backward_kernel_for_testing(std::optional<DropoutBackwardKernel> kernel) {
  g_dropout_backward.force_for_testing(kernel);
}
const char* dropout_backward_kernel_name(DropoutBackwardKernel kernel) { return g_dropout_backward.name(kernel); }

ColumnSumKernel column_sum_kernel() { return g_column_sum.value(); }
ColumnSumKernel parse_column_sum_kernel(const char* v) { return g_column_sum.parse(v); }
void set_column_sum_kernel_for_testing(std::optional<ColumnSumKernel> kernel) { g_column_sum.force_for_testing(kernel); }
const char* column_sum_kernel_name(ColumnSumKernel kernel) { return g_column_sum.name(kernel); }

GeluDropoutKernel gelu_dropout_kernel() { return g_gelu_dropout.value(); }
GeluDropoutKernel parse_gelu_dropout_kernel(const char* v) { return g_gelu_dropout.parse(v); }
void set_gelu_dropout_kernel_for_testing(std::optional<GeluDropoutKernel> kernel) {
  g_gelu_dropout.force_for_testing(kernel);
}
const char* gelu_dropout_kernel_name(GeluDropoutKernel kernel) { return g_gelu_dropout.name(kernel); }

AddLayerNormKernel add_layer_norm_kernel() { return g_add_layer_norm.value(); }
AddLayerNormKernel parse_add_layer_norm_kernel(const char* v) { return g_add_layer_norm.parse(v); }
void set_add_layer_norm_kernel_for_testing(std::optional<AddLayerNormKernel> kernel) {
  g_add_layer_norm.force_for_testing(kernel);
}
const char* add_layer_norm_kernel_name(AddLayerNormKernel kernel) { return g_add_layer_norm.name(kernel); }

EmbeddingBackwardKernel embedding_backward_kernel() { return g_embedding_backward.value(); }
EmbeddingBackwardKernel parse_embedding_backward_kernel(const char* v) { return g_embedding_backward.parse(v); }
void set_embedding_backward_kernel_for_testing(std::optional<EmbeddingBackwardKernel> kernel) {
  g_embedding_backward.force_for_testing(kernel);
}
const char* embedding_backward_kernel_name(EmbeddingBackwardKernel kernel) { return g_embedding_backward.name(kernel); }

DropoutKeep dropout_keep() { return g_dropout_keep.value(); }
DropoutKeep parse_dropout_keep(const char* v) { return g_dropout_keep.parse(v); }
void set_dropout_keep_for_testing(std::optional<DropoutKeep> keep) { g_dropout_keep.force_for_testing(keep); }
const char* dropout_keep_name(DropoutKeep keep) { return g_dropout_keep.name(keep); }

}  // namespace tandem::kernels
