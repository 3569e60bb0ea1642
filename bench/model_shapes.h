// The model sections of configs/*.yaml as the model benchmarks build them (classifier_bench,
// gradient_precision_bench): shape, per-device batch and vocabulary, and the classifier of
// that shape (4 classes, dropout 0.1).
#pragma once

#include <cstdint>

#include "nn/transformer.h"

namespace tandem::bench {

struct ModelShape {
  const char* name;
  int64_t d_model, heads, layers, ffn, seq, batch, vocab;
};

inline constexpr ModelShape kModelShapes[] = {
    {"demo", 64, 4, 2, 128, 64, 16, 5000},
    {"small", 128, 4, 2, 256, 128, 8, 30000},
    {"optimized", 256, 8, 4, 1024, 256, 128, 30000},
    {"imdb", 256, 8, 4, 1024, 512, 32, 30000},
};

inline nn::TextClassifierConfig classifier_config(const ModelShape& s) {
  nn::TextClassifierConfig c;
  c.vocab_size = s.vocab;
  c.d_model = s.d_model;
  c.n_heads = s.heads;
  c.num_layers = s.layers;
  c.dim_feedforward = s.ffn;
  c.max_seq_len = s.seq;
  c.num_classes = 4;
  c.dropout = 0.1;
  return c;
}

}  // namespace tandem::bench
