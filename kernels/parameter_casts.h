// How a forward casts the f32 master parameters to the compute dtype:
// TANDEM_PARAMETER_CASTS=each|batched, read once (core/env_switch.h; anything
// else is an Error naming the variable and the value). On every device: it
// decides how nn::TextClassifier's forward gets its compute-dtype weights
// (nn/parameter_casts.h).
//
//   each (the default, the path the H200 verified): every Linear and the
//     attention's in-projection cast their own weight and bias where they use
//     them, one `cast` op (one kernel launch) per tensor: 34 a forward at
//     ag_news_optimized's 4 layers (8 a layer and the head's 2; with the
//     embedding output's, the 35 casts, 0.174 ms, of the third H200 run's eager
//     op table), and as many launches in every replay of a graph step.
//   batched: the classifier's forward casts them all at once with
//     kernels::cast_many, one launch on a GPU (kernels/cuda/cast_many.cu), into
//     one buffer whose slices the layers read. Each slice becomes its
//     parameter's cast for autograd at the layer's first use of it
//     (kernels::record_cast), so its backward runs where `each`'s would, and
//     DDP's buckets see the gradients ready in the same order (a test checks the
//     order). The values are the same bits (the same round-to-nearest-even).
//     Memory: the slices share one allocation, freed when the last of them is,
//     so the compute-dtype weights live until the backward's last use of any
//     (2 bytes a cast parameter: 6.3 MB for ag_news_optimized's 3.16 M, whose
//     embedding tables are not cast).
#pragma once

#include <optional>

namespace tandem::kernels {

enum class ParameterCastMode { Each, Batched };

// TANDEM_PARAMETER_CASTS's choice, unless a test has overridden it.
ParameterCastMode parameter_casts();
// The choice an environment string names (null or empty: Each); throws Error naming the variable.
ParameterCastMode parse_parameter_casts(const char* value);
// Tests force a choice; nullopt returns to the environment's.
void set_parameter_casts_for_testing(std::optional<ParameterCastMode> how);
// "each" or "batched".
const char* parameter_casts_name(ParameterCastMode how);

}  // namespace tandem::kernels
