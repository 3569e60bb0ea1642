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
#pragma once

#include <string>
#include <vector>

#include "nn/layers.h"

namespace tandem::nn {

enum class Activation { Relu, Gelu, GeluTanh };
enum class Pooling { Mean, Cls };

Activation parse_activation(const std::string& name);  // relu | gelu | gelu_tanh
Pooling parse_pooling(const std::string& name);        // mean | cls

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t n_heads, int64_t dim_feedforward, double dropout,
                          Activation activation, bool norm_first, Init& init);
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask, ForwardContext& ctx) const;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& residual, const Tensor& mask, ForwardContext& ctx) const;
  Tensor feed_forward_block(const Tensor& x, const Tensor& residual, ForwardContext& ctx) const;

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

 private:
  TextClassifierConfig config_;
  std::shared_ptr<TokenPositionEmbedding> embed_;
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<Linear> head_;
};

}  // namespace tandem::nn
