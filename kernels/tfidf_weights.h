// TF-IDF weights of the tokens of a batch, for the bag model's TF-IDF pooling
// (scikit-learn's TfidfVectorizer(sublinear_tf=..., norm="l2") applied to
// token ids; kernels/pooling.h's weighted_sum_pool then sums the embeddings).
//
// tfidf_weights(ids [B, S] i32/i64, mask [B, S] u8, idf [V] f32/f64, sublinear_tf)
// -> w [B, S] in idf's dtype, on the ids' device:
//   v[b, s] = mask[b, s] == 0 ? 0 : tf(mask[b, s]) * idf[ids[b, s]],
//   tf(c) = 1 + ln c (sublinear_tf) or c,
//   w[b, s] = v[b, s] / sqrt(sum over s' of v[b, s']^2), a row of zeros staying zeros.
// The mask entry is the token's count in the text (the char_ngrams tokenizer's
// term_counts, data/char_ngrams.h; 1 for a token that is not counted). Nothing
// here is differentiable: the result never requires grad. An id outside [0, V)
// is an Error naming it on the CPU; on the GPU it gets weight 0 (the embedding
// of the same ids reports it, kernels/index_errors.h).
#pragma once

#include "core/tensor.h"

namespace tandem::kernels {

Tensor tfidf_weights(const Tensor& ids, const Tensor& mask, const Tensor& idf, bool sublinear_tf);

}  // namespace tandem::kernels
