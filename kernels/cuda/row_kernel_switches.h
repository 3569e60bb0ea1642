// Switches of the memory-bound row kernels (layer norm, masked-mean pooling,
// dropout backward, the bias gradients' column sums, GELU + dropout, bias + dropout + residual + layer norm,
// the token embedding's gradient, dropout's keep decisions in the fused GELU + dropout),
// each an environment variable read once (core/env_switch.h): unset or empty
// is the default, anything other than the names below is an Error naming the
// variable and the value. As with the attention switches
// (kernels/cuda/attention_switches.h), a new kernel sits behind its switch,
// defaulting to the path a GPU has verified, until a GPU run has timed both
// (issue #15; tools/gpu-check.sh's bench phase runs kernels_bench with each).
//
//   TANDEM_LAYER_NORM=one_row|multi_row|lanes  (kernels/cuda/layer_norm_kernels.cuh)
//     OneRow (the default): a thread group normalises one row, and in backward
//     walks its slot's rows with the next row's loads in flight. MultiRow: the
//     forward's group normalises R rows at once (R * V * C <= 16 values per
//     thread, at most 4) with the parameters loaded before the statistics, and
//     the backward keeps three rows' loads in flight instead of one (up to 8
//     values per thread per tensor; one, as OneRow, beyond). Why: at d_model 256
//     in 16 bits a row is one warp's 16-byte vectors and each thread has 16
//     bytes in flight, and the backward runs one warp per slot (1024 warps at
//     32768 rows): the H200 measured 24 % (forward) and 17 % (backward) of its
//     copy bandwidth there (docs/results/gpu.md). Same operations in the same
//     order, but the unrolled code may fuse a product and a sum into an FMA
//     where the one-row code does not: equal to a rounding, not bit for bit.
//     Lanes: one_row's forward; the backward deals each slot's rows to every
//     group of a block (8 warps at d_model 256 in 16 bits) instead of one, and
//     loads each row's statistics with its data, one row ahead: 8192 warps of
//     4 rows instead of 1024 of 32 at 32768 rows, the same partial sums. Its
//     column sums add in a fixed order of their own (layer_norm_kernels.cuh),
//     so it agrees with one_row to a rounding. The fused post-norm backward
//     (TANDEM_ADD_LAYER_NORM=fused) has a lanes kernel too.
//   TANDEM_MASKED_MEAN=one_block|lane_groups  (kernels/cuda/pooling.cu)
//     OneBlock (the default): one block per (sequence, 32 vector columns) sums
//     the sequence in 16 lanes. LaneGroups: the 16 lanes are dealt to up to 16
//     blocks, enough to cover the GPU twice, which write their lane sums to
//     scratch, and a second kernel adds them in lane order: the same bits, on
//     every SM instead of batch * columns / 32 of them (32 of 132 at imdb's
//     shape: 21-33 % of copy measured).
//   TANDEM_DROPOUT_BACKWARD=flat|batched  (kernels/cuda/bias_dropout_add.cu)
//     Flat (the default since 2026-12-01, from the third H200 run's rows):
//     without a bias gradient (plain dropout, and dropout + residual whose bias
//     gradient the linear before forms, TANDEM_BIAS_GRADIENT=gemm) the data is
//     one long row and a thread has one vector, so the kernel is compiled for
//     one row at a time: 54-64 registers instead of 88-116 (16-byte vectors),
//     twice the resident threads. Batched: the backward's thread walks four
//     rows of its slot at a time, as it does with a bias gradient (kept for
//     A/B runs). Why: the H200 timed flat 1.43-1.69x faster in all four rows
//     (third run, f32 and bf16, 16384 x 768 and 32768 x 256: bf16 22.85 against
//     15.07 us at 32768 x 256) and passed its same-bits test there
//     (NewRowKernels.DropoutBackwardFlatGivesTheBatchedBits).
//     The same arithmetic per element: the same bits.
//   TANDEM_COLUMN_SUM=thread|block  (kernels/cuda/column_sum_kernels.cuh)
//     Thread (the default): pass 1 of the bias gradients' column sums (linear,
//     bias_gelu, bias_dropout_add) runs a thread per (vector column, slot),
//     walking the slot's 32 rows alone. Block: a block per (32 vector
//     columns, slot), its 8 thread rows taking every 8th row of the slot and
//     adding their sums in shared memory in order: 8x the threads, four rows
//     each, the same slots and partial sums. The sums add in another order:
//     equal to a rounding, not bit for bit; the input gradients are the same bits.
//   TANDEM_GELU_DROPOUT=fused|separate  (kernels/gelu.h's bias_gelu_dropout,
//     kernels/cuda/bias_gelu_kernels.cuh)
//     Fused is the default since the H200 timed it (2026-11-28: 1.2-1.7x forward,
//     1.5-2.0x backward in f32 and bf16 at both bench shapes; the same bits).
//     Separate: the feed-forward block's dropout(gelu(x + b)) runs
//     the bias + GELU kernel, then dropout's, through a [rows, dim] temporary;
//     backward, dropout's pass, then bias + GELU's. Fused: one kernel each way,
//     which applies dropout before its store (forward) or to dy as it loads it
//     (backward): a read and a write of the activation fewer each way (at
//     ag_news_optimized's 32768 x 1024 in bf16, 256 MiB of traffic become 128 forward, 320
//     become 192 backward). The fused kernels round at the points the separate ones store:
//     the same bits.
//   TANDEM_ADD_LAYER_NORM=fused|separate  (kernels/bias_dropout_add_layer_norm.h,
//     kernels/cuda/layer_norm_kernels.cuh)
//     Fused is the default since the H200 timed it (2026-11-28: 1.18-1.45x forward,
//     1.08-1.39x backward in f32 and bf16 at both bench shapes; the same bits).
//     Separate: a post-norm sublayer's layer_norm(dropout(x + b) +
//     residual) runs bias_dropout_add's kernel, then the layer norm's; backward,
//     the layer norm's, then bias_dropout_add's. Fused: the layer norm's forward
//     computes s = dropout(x + b) + residual as it loads the rows (and stores s,
//     its backward's input), and its backward forms the branch's gradient and
//     bias-gradient column sums as it stores the residual's: a read of the
//     [rows, d_model] activation fewer each way and one launch instead of two.
//     The same bits (the bias gradient: with TANDEM_COLUMN_SUM=thread; to a
//     rounding with block). With TANDEM_LAYER_NORM=lanes the fused backward takes
//     the lanes walk and adds the branch bias's gradient in its group order: that
//     gradient agrees with the separate kernels' to a rounding, the rest bit for bit.
//   TANDEM_EMBEDDING_BACKWARD=windows|pieces  (kernels/cuda/embedding.cu,
//     kernels/cuda/embedding_kernels.cuh)
//     Windows (the default since the H200 timed it, 2026-11-28): after the ids are
//     sorted, a warp per 32 sorted positions with 8 rows' loads in flight, and a long
//     segment's partial rows dealt to 8 lanes per column. Pieces: a block per sorted
//     position sums the piece of 64 positions that starts there (most blocks return
//     at once), and one thread per column adds a long segment's pieces one after
//     another. Why: windows took 0.62-0.85x pieces' time on uniform ids and
//     0.23-0.29x with a padding id filling 85 % of the batch, in all eight bench rows
//     (f32 and bf16, 16384 x 768 and 32768 x 256). Sums in another order: equal to a
//     rounding (the same bits as the CPU for an id whose occurrences fall in one window).
//   TANDEM_DROPOUT_KEEP=recompute|saved  (kernels/gelu.h, kernels/cuda/dropout_factors.cuh)
//     Recompute (the default): the fused GELU + dropout's backward computes each keep
//     decision's Philox block again. Saved: its forward stores the 8 decisions of
//     each block as a byte (1/16 of a 16-bit activation: 4 MiB per FFN at
//     ag_news_optimized's 32768 x 1024) and its backward reads them instead. Why:
//     on the H200 (third run, bf16, 32768 x 1024) dropout took that backward from
//     90.8 to 125.6 us, about what its 4.2 M blocks cost. The same decisions: the
//     same bits. Only with TANDEM_GELU_DROPOUT=fused on a GPU; attention's
//     dropout has its own switch (TANDEM_ATTENTION_DROPOUT_KEEP).
#pragma once

#include <optional>

namespace tandem::kernels {

enum class LayerNormKernel { OneRow, MultiRow, Lanes };

// TANDEM_LAYER_NORM's kernel, unless a test has overridden it.
LayerNormKernel layer_norm_kernel();
// The kernel an environment string names (null or empty: OneRow); throws Error naming the variable.
LayerNormKernel parse_layer_norm_kernel(const char* value);
// Tests force a kernel; nullopt returns to the environment's choice.
void set_layer_norm_kernel_for_testing(std::optional<LayerNormKernel> kernel);
// "one_row", "multi_row" or "lanes".
const char* layer_norm_kernel_name(LayerNormKernel kernel);

enum class MaskedMeanKernel { OneBlock, LaneGroups };

// TANDEM_MASKED_MEAN's kernel, unless a test has overridden it.
MaskedMeanKernel masked_mean_kernel();
// The kernel an environment string names (null or empty: OneBlock); throws Error naming the variable.
MaskedMeanKernel parse_masked_mean_kernel(const char* value);
// Tests force a kernel; nullopt returns to the environment's choice.
void set_masked_mean_kernel_for_testing(std::optional<MaskedMeanKernel> kernel);
// "one_block" or "lane_groups".
const char* masked_mean_kernel_name(MaskedMeanKernel kernel);

enum class DropoutBackwardKernel { Flat, Batched };

// TANDEM_DROPOUT_BACKWARD's kernel, unless a test has overridden it.
DropoutBackwardKernel dropout_backward_kernel();
// The kernel an environment string names (null or empty: Flat); throws Error naming the variable.
DropoutBackwardKernel parse_dropout_backward_kernel(const char* value);
// Tests force a kernel; nullopt returns to the environment's choice.
void set_dropout_backward_kernel_for_testing(std::optional<DropoutBackwardKernel> kernel);
// "flat" or "batched".
const char* dropout_backward_kernel_name(DropoutBackwardKernel kernel);

enum class ColumnSumKernel { Thread, Block };

// TANDEM_COLUMN_SUM's walk, unless a test has overridden it.
ColumnSumKernel column_sum_kernel();
// The walk an environment string names (null or empty: Thread); throws Error naming the variable.
ColumnSumKernel parse_column_sum_kernel(const char* value);
// Tests force a walk; nullopt returns to the environment's choice.
void set_column_sum_kernel_for_testing(std::optional<ColumnSumKernel> kernel);
// "thread" or "block".
const char* column_sum_kernel_name(ColumnSumKernel kernel);

enum class GeluDropoutKernel { Separate, Fused };

// TANDEM_GELU_DROPOUT's kernels, unless a test has overridden them.
GeluDropoutKernel gelu_dropout_kernel();
// The kernels an environment string names (null or empty: Fused); throws Error naming the variable.
GeluDropoutKernel parse_gelu_dropout_kernel(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_gelu_dropout_kernel_for_testing(std::optional<GeluDropoutKernel> kernel);
// "fused" or "separate".
const char* gelu_dropout_kernel_name(GeluDropoutKernel kernel);

enum class AddLayerNormKernel { Separate, Fused };

// TANDEM_ADD_LAYER_NORM's kernels, unless a test has overridden them.
AddLayerNormKernel add_layer_norm_kernel();
// The kernels an environment string names (null or empty: Fused); throws Error naming the variable.
AddLayerNormKernel parse_add_layer_norm_kernel(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_add_layer_norm_kernel_for_testing(std::optional<AddLayerNormKernel> kernel);
// "fused" or "separate".
const char* add_layer_norm_kernel_name(AddLayerNormKernel kernel);

enum class EmbeddingBackwardKernel { Pieces, Windows };

// TANDEM_EMBEDDING_BACKWARD's walk, unless a test has overridden it.
EmbeddingBackwardKernel embedding_backward_kernel();
// The walk an environment string names (null or empty: Windows); throws Error naming the variable.
EmbeddingBackwardKernel parse_embedding_backward_kernel(const char* value);
// Tests force a walk; nullopt returns to the environment's choice.
void set_embedding_backward_kernel_for_testing(std::optional<EmbeddingBackwardKernel> kernel);
// "windows" or "pieces".
const char* embedding_backward_kernel_name(EmbeddingBackwardKernel kernel);

enum class DropoutKeep { Recompute, Saved };

// TANDEM_DROPOUT_KEEP's choice, unless a test has overridden it.
DropoutKeep dropout_keep();
// The choice an environment string names (null or empty: Recompute); throws Error naming the variable.
DropoutKeep parse_dropout_keep(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_dropout_keep_for_testing(std::optional<DropoutKeep> keep);
// "recompute" or "saved".
const char* dropout_keep_name(DropoutKeep keep);

}  // namespace tandem::kernels
