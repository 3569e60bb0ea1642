// TANDEM_ATTENTION_FORWARD, TANDEM_ATTENTION_BACKWARD, TANDEM_ATTENTION_KEY_TILES,
// TANDEM_ATTENTION_DROPOUT_KEEP, TANDEM_ATTENTION_OCCUPANCY, TANDEM_ATTENTION_BLOCK_ORDER and
// TANDEM_ATTENTION_FUSED_CHUNKS (see attention_switches.h).
#include "kernels/cuda/attention_switches.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<AttentionForwardKernel, 3> g_forward{"TANDEM_ATTENTION_FORWARD",
                                                          {{"pipelined", AttentionForwardKernel::Pipelined},
                                                           {"tiled", AttentionForwardKernel::Tiled},
                                                           {"pipelined_wide", AttentionForwardKernel::PipelinedWide}}};

constinit EnvSwitch<AttentionBackwardPath, 6> g_backward{
    "TANDEM_ATTENTION_BACKWARD",
    {{"auto", AttentionBackwardPath::Auto},
     {"split", AttentionBackwardPath::Split},
     {"fused", AttentionBackwardPath::Fused},
     {"split_pipelined", AttentionBackwardPath::SplitPipelined},
     {"fused_ordered", AttentionBackwardPath::FusedOrdered},
     {"fused_ordered_pipelined", AttentionBackwardPath::FusedOrderedPipelined}}};

constinit EnvSwitch<AttentionKeyTiles, 2> g_key_tiles{
    "TANDEM_ATTENTION_KEY_TILES", {{"all", AttentionKeyTiles::All}, {"trimmed", AttentionKeyTiles::Trimmed}}};

constinit EnvSwitch<AttentionDropoutKeep, 2> g_dropout_keep{
    "TANDEM_ATTENTION_DROPOUT_KEEP",
    {{"recompute", AttentionDropoutKeep::Recompute}, {"saved", AttentionDropoutKeep::Saved}}};

constinit EnvSwitch<AttentionOccupancy, 2> g_occupancy{
    "TANDEM_ATTENTION_OCCUPANCY", {{"default", AttentionOccupancy::Default}, {"high", AttentionOccupancy::High}}};

constinit EnvSwitch<AttentionBlockOrder, 2> g_block_order{
    "TANDEM_ATTENTION_BLOCK_ORDER",
    {{"heads_first", AttentionBlockOrder::HeadsFirst}, {"tiles_first", AttentionBlockOrder::TilesFirst}}};

constinit EnvSwitch<AttentionFusedChunks, 2> g_fused_chunks{
    "TANDEM_ATTENTION_FUSED_CHUNKS", {{"even", AttentionFusedChunks::Even}, {"waves", AttentionFusedChunks::Waves}}};

}  // namespace

AttentionForwardKernel attention_forward_kernel() { return g_forward.value(); }
AttentionForwardKernel parse_attention_forward(const char* v) { return g_forward.parse(v); }
void set_attention_forward_for_testing(std::optional<AttentionForwardKernel> kernel) {
  g_forward.force_for_testing(kernel);
}

const char* attention_forward_kernel_name(AttentionForwardKernel kernel) { return g_forward.name(kernel); }

AttentionBackwardPath attention_backward_path() { return g_backward.value(); }
AttentionBackwardPath parse_attention_backward_path(const char* v) { return g_backward.parse(v); }
void set_attention_backward_path_for_testing(std::optional<AttentionBackwardPath> path) {
  g_backward.force_for_testing(path);
}
const char* attention_backward_path_name(AttentionBackwardPath path) { return g_backward.name(path); }

AttentionKeyTiles attention_key_tiles() { return g_key_tiles.value(); }
AttentionKeyTiles parse_attention_key_tiles(const char* v) { return g_key_tiles.parse(v); }
void set_attention_key_tiles_for_testing(std::optional<AttentionKeyTiles> tiles) {
  g_key_tiles.force_for_testing(tiles);
}
const char* attention_key_tiles_name(AttentionKeyTiles tiles) { return g_key_tiles.name(tiles); }

AttentionDropoutKeep attention_dropout_keep() { return g_dropout_keep.value(); }
AttentionDropoutKeep parse_attention_dropout_keep(const char* v) { return g_dropout_keep.parse(v); }
void set_attention_dropout_keep_for_testing(std::optional<AttentionDropoutKeep> keep) {
  g_dropout_keep.force_for_testing(keep);
}
const char* attention_dropout_keep_name(AttentionDropoutKeep keep) { return g_dropout_keep.name(keep); }

AttentionOccupancy attention_occupancy() { return g_occupancy.value(); }
AttentionOccupancy parse_attention_occupancy(const char* v) { return g_occupancy.parse(v); }
void set_attention_occupancy_for_testing(std::optional<AttentionOccupancy> occupancy) {
  g_occupancy.force_for_testing(occupancy);
}
const char* attention_occupancy_name(AttentionOccupancy occupancy) { return g_occupancy.name(occupancy); }

AttentionBlockOrder attention_block_order() { return g_block_order.value(); }
AttentionBlockOrder parse_attention_block_order(const char* v) { return g_block_order.parse(v); }
void set_attention_block_order_for_testing(std::optional<AttentionBlockOrder> order) {
  g_block_order.force_for_testing(order);
}
const char* attention_block_order_name(AttentionBlockOrder order) { return g_block_order.name(order); }

AttentionFusedChunks attention_fused_chunks() { return g_fused_chunks.value(); }
AttentionFusedChunks parse_attention_fused_chunks(const char* v) { return g_fused_chunks.parse(v); }
void set_attention_fused_chunks_for_testing(std::optional<AttentionFusedChunks> chunks) {
  g_fused_chunks.force_for_testing(chunks);
}
const char* attention_fused_chunks_name(AttentionFusedChunks chunks) { return g_fused_chunks.name(chunks); }

AttentionBackwardPath resolve_attention_backward(AttentionBackwardPath path, bool is_f32, bool dropout) {
  if (path == AttentionBackwardPath::SplitPipelined && is_f32) return AttentionBackwardPath::Split;
  if (path == AttentionBackwardPath::FusedOrderedPipelined && is_f32) return AttentionBackwardPath::FusedOrdered;
  if (path != AttentionBackwardPath::Auto) return path;
  return is_f32 || dropout ? AttentionBackwardPath::Fused : AttentionBackwardPath::SplitPipelined;
}

}  // namespace tandem::kernels
