// The encoder layer and the classifier our users train.
//
// TransformerEncoderLayer has nn.TransformerEncoderLayer's semantics
// (batch_first): post-norm by default,
//   x = norm1(x + dropout1(self_attn(x)));  x = norm2(x + dropout2(linear2(dropout(act(linear1(x))))))
// or pre-norm (norm_first),
//   x = x + dropout1(self_attn(norm1(x)));  x = x + dropout2(linear2(dropout(act(linear1(norm2(x))))))
// with PyTorch's parameter names (self_attn.*, linear1, linear2, norm1, norm2).
// Internally the biases are fused into the following kernels (bias + GELU,
// bias + dropout + residual), which is why the linears run without bias.
//
// TextClassifier: token + position embeddings, dropout, num_layers encoder
// layers (plus a final LayerNorm "encoder.norm" for pre-norm), masked-mean or
// first-token pooling, and a linear head to num_classes logits. Without
// position_embedding there is no "embed.position.weight"; with num_layers 0 as
// well it is fastText's bag model: mean of the token embeddings, linear head.
// Pooling::TfIdf pools with TF-IDF weights instead of the mean (kernels/
// tfidf_weights.h: tf from the mask's token counts, sublinear_tf or raw, times
// the buffer "idf", L2-normalised per sequence): the bag model is then a linear
// classifier over scikit-learn's TfidfVectorizer features, low-rank through the
// embedding. The idf buffer (one entry per token id) is all ones until
// set_idf; the trainer sets it from the training split
// (data/tfidf.h), and it is saved and loaded with the other weights.
#pragma once

#include <string>
#include <vector>

#include "nn/layers.h"

namespace tandem::nn {

enum class Activation { Relu, Gelu, GeluTanh };
enum class Pooling { Mean, Cls, TfIdf };

Activation parse_activation(const std::string& name);  // relu | gelu | gelu_tanh
Pooling parse_pooling(const std::string& name);        // mean | cls | tfidf

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t n_heads, int64_t dim_feedforward, double dropout,
                          Activation activation, bool norm_first, Init& init);
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask, ForwardContext& ctx) const;

 private:
  // Each sublayer ends in epilogue(): norm is the post-norm layer's LayerNorm after it, or null (pre-norm).
  Tensor self_attention_block(const Tensor& x, const Tensor& residual, const Tensor& mask, const LayerNorm* norm,
                              ForwardContext& ctx) const;
  Tensor feed_forward_block(const Tensor& x, const Tensor& residual, const LayerNorm* norm, ForwardContext& ctx) const;
  Tensor epilogue(const Tensor& branch, const Tensor& bias, const Tensor& residual, const LayerNorm* norm,
                  ForwardContext& ctx) const;

  double dropout_;
  Activation activation_;
  bool norm_first_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
};

struct TextClassifierConfig {
  int64_t vocab_size = 0;
  int64_t d_model = 128;
  int64_t n_heads = 4;
  int64_t num_layers = 2;
  int64_t dim_feedforward = 256;
  int64_t max_seq_len = 128;
  int64_t num_classes = 2;
  double dropout = 0.1;
  Pooling pooling = Pooling::Mean;
  Activation activation = Activation::Gelu;
  bool norm_first = false;
  bool position_embedding = true;
  bool sublinear_tf = true;  // Pooling::TfIdf: tf = 1 + ln(count) (else the count)
  // Token (and position) embeddings drawn from N(0, embedding_init_std^2). 1 is PyTorch's default;
  // a bag model learns better from small values (fastText: U(-1/dim, 1/dim)), where the random
  // part of an n-gram seen in few training texts would otherwise outweigh what it learns.
  double embedding_init_std = 1.0;
};

class Encoder : public Module {
 public:
  Encoder(const TextClassifierConfig& c, Init& init);
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask, ForwardContext& ctx) const;

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;  // registered under "layers.N"
  std::shared_ptr<LayerNorm> norm_;  // pre-norm only
};

class TextClassifier : public Module {
 public:
  TextClassifier(const TextClassifierConfig& config, uint64_t seed);
  // ids [B, S] (i32/i64), mask [B, S] u8 (1 = token, 0 = padding) -> logits [B, num_classes]
  // in the compute dtype.
  Tensor forward(const Tensor& ids, const Tensor& mask, ForwardContext& ctx) const;
  const TextClassifierConfig& config() const { return config_; }
  // Pooling::TfIdf only: copies `idf` (vocab_size entries) into the "idf" buffer, on the model's device.
  void set_idf(const std::vector<float>& idf);

 private:
  TextClassifierConfig config_;
  Tensor idf_;  // [vocab_size] f32, Pooling::TfIdf only
  std::shared_ptr<TokenPositionEmbedding> embed_;
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<Linear> head_;
};

}  // namespace tandem::nn
