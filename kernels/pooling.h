// Sequence pooling of encoder states x [B, S, D] into one vector per sequence.
//
// masked_mean_pool(x, mask): mask [B, S] u8, nonzero for real tokens and 0 for
// padding; y[b] = the mean of x[b, s] over the real tokens, summed in f32 (f64
// for f64) and divided by their count. A row with no real token gives zeros
// (and zero gradient), never NaN. first_token_pool(x) = x[:, 0, :], the [CLS]
// pooling of BERT-style classifiers (needs S >= 1).
//
// weighted_sum_pool(x, weights): weights [B, S] in x's accumulation dtype (f32,
// f64 for f64 x), on x's device; y[b] = sum over s of weights[b, s] * x[b, s],
// summed in that dtype and rounded once. The weights are constants: no gradient
// flows to them (one that requires grad is an error), dx[b, s] = weights[b, s] *
// dy[b]. With TF-IDF weights (kernels/tfidf_weights.h) it is the bag model's
// TF-IDF pooling.
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor masked_mean_pool(const Tensor& x, const Tensor& mask);
Tensor first_token_pool(const Tensor& x);
Tensor weighted_sum_pool(const Tensor& x, const Tensor& weights);

}  // namespace tandem::kernels
