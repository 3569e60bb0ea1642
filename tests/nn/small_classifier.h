// A small TextClassifier and one padded batch for it: what the nn tests that run the
// same forward and backward two ways (parameter casts each or batched, linear
// gradients through casts or to the masters) feed both ways.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/transformer.h"

namespace tandem::testing {

// 2 layers of d_model 32 with 4 heads and an FFN of 64, a vocabulary of 50, 3 classes, dropout 0.1.
inline nn::TextClassifierConfig small_classifier() {
  nn::TextClassifierConfig c;
  c.vocab_size = 50;
  c.d_model = 32;
  c.n_heads = 4;
  c.num_layers = 2;
  c.dim_feedforward = 64;
  c.max_seq_len = 16;
  c.num_classes = 3;
  c.dropout = 0.1;
  return c;
}

struct Batch {
  Tensor ids, mask;  // [2, 9]: i64 ids, u8 mask
};

// Ids spread over the vocabulary; the second row's last four tokens are padding.
inline Batch padded_batch(Device device) {
  std::vector<int64_t> ids(18);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % 50);
  std::vector<double> m(18, 1.0);
  for (size_t i = 14; i < 18; ++i) m[i] = 0.0;
  return {Tensor::from_vector(ids, {2, 9}).to(device), Tensor::from_vector(m, {2, 9}, DType::U8).to(device)};
}

}  // namespace tandem::testing
