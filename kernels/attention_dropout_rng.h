// Which random numbers decide attention dropout: TANDEM_ATTENTION_DROPOUT_RNG=
// philox10x8|philox7x16, read once (core/env_switch.h; anything else is an
// Error naming the variable and the value). On every device: the CPU reference
// and the CUDA kernels draw the same decisions under either, and an op keeps
// the rule its forward used for its backward (AttentionDropout::rng).
//
//   philox10x8 (the default, the rule the H200 runs verified): Philox4x32-10,
//     8 decisions per block from 16-bit uniforms, p quantised to 2^-16 (the
//     elementwise dropout's rule, kernels/dropout_mask.h).
//   philox7x16: Philox4x32-7, 16 decisions per block from 8-bit uniforms, p
//     quantised to 1/256 (0.1 becomes 26/256 = 0.1016), the kept values scaled by
//     the inverse of the quantised keep rate: FlashAttention-2's generator and
//     uniforms (csrc/flash_attn/src/philox.cuh, dropout.h), so PyTorch's SDPA
//     draws its attention dropout this way on a GPU. Seven rounds is the fewest
//     Salmon et al. found to pass BigCrush; ten is Random123's safety margin.
//     A pass then spends 7 rounds per 16 decisions where philox10x8 spends 10
//     per 8: 2.9x less Philox work, the integer work that made dropout 0.1 cost
//     the third H200 run's head-dim-32 attention 1.97x its forward time and 1.54x
//     its split backward's (docs/results/gpu.md). Opt-in until a GPU has timed it.
#pragma once

#include <cstdint>
#include <optional>

namespace tandem::kernels {

enum class AttentionDropoutRng : uint8_t { Philox10x8, Philox7x16 };

// TANDEM_ATTENTION_DROPOUT_RNG's choice, unless a test has overridden it.
AttentionDropoutRng attention_dropout_rng();
// The choice an environment string names (null or empty: Philox10x8); throws Error naming the variable.
AttentionDropoutRng parse_attention_dropout_rng(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_attention_dropout_rng_for_testing(std::optional<AttentionDropoutRng> rng);
// "philox10x8" or "philox7x16".
const char* attention_dropout_rng_name(AttentionDropoutRng rng);

}  // namespace tandem::kernels
