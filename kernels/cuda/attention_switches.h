// The seven switches of the CUDA attention op, each an environment variable read
// once (core/env_switch.h): unset or empty is the default, anything other than
// the names below is an Error naming the variable and the value. A new kernel
// sits behind a switch that defaults to the verified path (issue #15) until a
// GPU has run it; the defaults below are what two GPU runs measured fastest
// (docs/results/gpu.md).
//
//   TANDEM_ATTENTION_FORWARD=pipelined|tiled|pipelined_wide  the forward kernel for f16/bf16:
//     Pipelined (the default; kernels/cuda/attention_forward_pipelined.cuh:
//     cp.async double buffering and ldmatrix; 16 query rows per warp, four
//     blocks per SM at head dims up to 64; 1.2-2.0x the tiled kernel on the
//     H200 at every bench shape), Tiled (forward_kernel) or PipelinedWide (the
//     same kernel with 32 query rows per warp at head dims up to 64, two blocks
//     per SM; 16 at 128: 5 % faster than Pipelined at 64 x 512 x 12 heads,
//     slower at the smaller shapes). f32 always runs Tiled.
//   TANDEM_ATTENTION_BACKWARD=auto|split|fused|split_pipelined|fused_ordered|fused_ordered_pipelined
//     path (kernels/cuda/attention_cuda.h): Auto (the default) runs Fused
//     (kernels/cuda/attention_backward_fused.cuh) where it was measured faster,
//     SplitPipelined elsewhere (resolve_attention_backward). SplitPipelined is Split with
//     both passes' streamed tiles double-buffered by cp.async
//     (kernels/cuda/attention_backward_pipelined.cuh; f16/bf16, f32 runs Split).
//     FusedOrdered is Fused with its dQ shares added in place, key tile after key
//     tile, to one L2-resident f32 accumulator per head instead of written out as
//     partials and summed by a second kernel: the same bits. FusedOrderedPipelined
//     is FusedOrdered with the query tiles double-buffered by cp.async (16 bits;
//     f32 runs FusedOrdered). The third GPU run's bf16 bench had SplitPipelined 0.5-6 % faster
//     than Split without dropout at every shape (the same bits), so auto runs it there; FusedOrdered
//     and FusedOrderedPipelined slower than Fused at every shape, with dropout or without
//     (docs/results/gpu/2026-11-28-third/bench_attention_bf16_*.txt).
//   TANDEM_ATTENTION_KEY_TILES=all|trimmed  which 64-key tiles every attention kernel visits
//     where there is a key-padding mask: All (the default, what the GPU runs measured) or Trimmed:
//     a first launch finds each batch row's last real key (key_end_kernel) and every kernel skips
//     the key tiles past it (attention_kernels.cuh: key_tiles_of), with the same results bit for
//     bit. Tandem's batches pad every row to max_seq_len, so a row of length L < S costs the
//     attention about L / S of its work instead of all of it. Opt-in until a GPU has run it.
//   TANDEM_ATTENTION_DROPOUT_KEEP=recompute|saved  where the backward gets attention dropout's keep
//     decisions: Recompute (the default, what the GPU runs measured): each backward pass computes
//     them again from Philox, one block per 8 decisions, as the forward did; Saved: the forward
//     also writes them, one bit per element (kernels/attention_params.h: attention_keep_bytes,
//     S^2 / 8 bytes per head), kept with the op's other saved tensors until its backward, which
//     reads them instead: the same decisions and bits, no Philox in backward. On the H200 (third
//     run) dropout 0.1 made the split backward 1.54x slower at the configs' head dim 32 (0.211
//     against 0.137 ms), where both of its passes compute every decision again. Opt-in until a
//     GPU has timed it.
//   TANDEM_ATTENTION_OCCUPANCY=default|high  how many blocks per SM the 16-bit kernels at head dims up
//     to 32 (the configs' 256 / 8 heads) are compiled for: Default (what the GPU runs measured) or High:
//     the pipelined forward five instead of four (96 registers instead of 112: 20 warps per SM instead
//     of 16) and split_pipelined's two passes three instead of two (168 registers instead of 193-206: 12
//     warps instead of 8; the dK/dV pass with 32-query tiles), none spilling (nvcc 13.0). The same
//     results bit for bit (only the tile of the dK/dV pass changes, whose sums do not depend on it).
//     The third H200 run had the forward issuing about a quarter of the instructions per cycle it
//     could, waiting: more resident warps is the plain answer to that. Nothing else changes (the wide
//     forward, the fused paths and head dims past 32 run their default kernels). Opt-in until a GPU
//     has timed it.
//   TANDEM_ATTENTION_BLOCK_ORDER=heads_first|tiles_first  the order of the blocks in the forward's
//     grid (tiled, pipelined, wide: a block per (head, query tile)): HeadsFirst (the default, what the
//     GPU runs measured): blockIdx.x is the head, so the blocks resident at once are as many different
//     heads, each of them streaming its own K and V; TilesFirst: blockIdx.x is the tile, so a head's
//     tiles run side by side and share one copy of its K and V in L2, as FlashAttention-2's grid does. The same results bit for bit (a block
//     computes the same whatever its place). Why: heads first, the 528 blocks of the four-block
//     pipelined forward on 132 SMs at 64 x 512 x 12 heads x 64 stream 528 heads' K and V, 69 MB,
//     more than the H200's 60 MiB of L2, and the third run had that forward doing 18 % less work per
//     filled round of blocks there than at 8 x 512 x 12 (whose 96 heads fit), where the two-block
//     kernels (264 heads, 35 MB) did not (docs/results/attention_block_order.md). A grid's y dimension holds at most 65535 heads: beyond, heads first runs.
//     The backward keeps its grids (its two-block passes showed no such loss, and reading the switch
//     at run time cost its kernels spills). Opt-in until a GPU has timed it.
//   TANDEM_ATTENTION_FUSED_CHUNKS=even|waves  how the fused backward (and its ordered variants) splits
//     the heads into launches when their dQ scratch exceeds 64 MiB (attention_backward_fused.cuh:
//     plan_fused_backward): Even (the default, what the GPU runs measured), the fewest launches, as
//     even as possible; Waves: chunks of whole rounds of the blocks the device holds at once (SMs x
//     the kernel's blocks per SM), fewest rounds in all, then fewest launches. A launch's last round,
//     part-filled, idles SMs until the next launch (which starts after it and its reduction): at
//     64 x 512 x 12 x 64 on the H200 even is 12 launches of 1.29 waves, 24 rounds, waves 16 launches
//     of one, 16 rounds; at the configs' 128 x 256 tokens and 8 heads, 12 rounds against 11. The
//     same results bit for bit (every chunk adds its heads' dQ shares in the same order). Opt-in until
//     a GPU has timed it.
#pragma once

#include <optional>

namespace tandem::kernels {

enum class AttentionForwardKernel { Pipelined, Tiled, PipelinedWide };

// TANDEM_ATTENTION_FORWARD's kernel, unless a test has overridden it.
AttentionForwardKernel attention_forward_kernel();
// The kernel an environment string names (null or empty: Pipelined); throws Error naming the variable.
AttentionForwardKernel parse_attention_forward(const char* value);
// Tests force a kernel; nullopt returns to the environment's choice.
void set_attention_forward_for_testing(std::optional<AttentionForwardKernel> kernel);
// "pipelined", "tiled" or "pipelined_wide".
const char* attention_forward_kernel_name(AttentionForwardKernel kernel);

enum class AttentionBackwardPath { Auto, Split, Fused, SplitPipelined, FusedOrdered, FusedOrderedPipelined };

// TANDEM_ATTENTION_BACKWARD's path, unless a test has overridden it.
AttentionBackwardPath attention_backward_path();
// The path an environment string names (null or empty: Auto); throws Error naming the variable.
AttentionBackwardPath parse_attention_backward_path(const char* value);
// Tests force a path; nullopt returns to the environment's value.
void set_attention_backward_path_for_testing(std::optional<AttentionBackwardPath> path);
// "auto", "split", "fused", "split_pipelined", "fused_ordered" or "fused_ordered_pipelined".
const char* attention_backward_path_name(AttentionBackwardPath path);

// The path that runs: Auto's choice below; Split, Fused and FusedOrdered stand for themselves, and so do
// SplitPipelined and FusedOrderedPipelined in 16 bits (in f32 they are Split and FusedOrdered: cp.async
// of 8 elements needs 16-bit data).
// Auto is Fused where a GPU run measured it faster: in f32 (the H200 bench: 0.77-0.86x split's time at 5 of 6 shapes, 1.03x at the
// sixth) and with attention dropout (a whole bf16 training step of configs/ag_news_optimized.yaml,
// dropout 0.1: 8.29 against 8.88 ms, fused regenerating each keep decision once where split does
// twice); SplitPipelined for 16-bit without dropout (split 1.05-1.4x faster than fused there at every
// bench shape, and split_pipelined 0.5-6 % faster than split at all six bf16 shapes of the third H200
// run, 1.198 against 1.267 ms at 64 x 512 x 12 x 64, with the same bits on that GPU; auto's choice
// there since 2026-12-01).
AttentionBackwardPath resolve_attention_backward(AttentionBackwardPath path, bool is_f32, bool dropout);

enum class AttentionKeyTiles { All, Trimmed };

// TANDEM_ATTENTION_KEY_TILES's choice, unless a test has overridden it.
AttentionKeyTiles attention_key_tiles();
// The choice an environment string names (null or empty: All); throws Error naming the variable.
AttentionKeyTiles parse_attention_key_tiles(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_attention_key_tiles_for_testing(std::optional<AttentionKeyTiles> tiles);
// "all" or "trimmed".
const char* attention_key_tiles_name(AttentionKeyTiles tiles);

enum class AttentionDropoutKeep { Recompute, Saved };

// TANDEM_ATTENTION_DROPOUT_KEEP's choice, unless a test has overridden it.
AttentionDropoutKeep attention_dropout_keep();
// The choice an environment string names (null or empty: Recompute); throws Error naming the variable.
AttentionDropoutKeep parse_attention_dropout_keep(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_attention_dropout_keep_for_testing(std::optional<AttentionDropoutKeep> keep);
// "recompute" or "saved".
const char* attention_dropout_keep_name(AttentionDropoutKeep keep);

enum class AttentionOccupancy { Default, High };

// TANDEM_ATTENTION_OCCUPANCY's choice, unless a test has overridden it.
AttentionOccupancy attention_occupancy();
// The choice an environment string names (null or empty: Default); throws Error naming the variable.
AttentionOccupancy parse_attention_occupancy(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_attention_occupancy_for_testing(std::optional<AttentionOccupancy> occupancy);
// "default" or "high".
const char* attention_occupancy_name(AttentionOccupancy occupancy);

enum class AttentionBlockOrder { HeadsFirst, TilesFirst };

// TANDEM_ATTENTION_BLOCK_ORDER's choice, unless a test has overridden it.
AttentionBlockOrder attention_block_order();
// The choice an environment string names (null or empty: HeadsFirst); throws Error naming the variable.
AttentionBlockOrder parse_attention_block_order(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_attention_block_order_for_testing(std::optional<AttentionBlockOrder> order);
// "heads_first" or "tiles_first".
const char* attention_block_order_name(AttentionBlockOrder order);

enum class AttentionFusedChunks { Even, Waves };

// TANDEM_ATTENTION_FUSED_CHUNKS's choice, unless a test has overridden it.
AttentionFusedChunks attention_fused_chunks();
// The choice an environment string names (null or empty: Even); throws Error naming the variable.
AttentionFusedChunks parse_attention_fused_chunks(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_attention_fused_chunks_for_testing(std::optional<AttentionFusedChunks> chunks);
// "even" or "waves".
const char* attention_fused_chunks_name(AttentionFusedChunks chunks);

}  // namespace tandem::kernels
