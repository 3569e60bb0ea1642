#include "nn/transformer.h"

#include "core/check.h"
#include "kernels/bias_dropout_add.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/pooling.h"
#include "kernels/tfidf_weights.h"
#include "nn/parameter_casts.h"

namespace tandem::nn {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::Relu;
  if (name == "gelu") return Activation::Gelu;
  if (name == "gelu_tanh") return Activation::GeluTanh;
  TANDEM_FAIL("unknown activation '{}' (relu, gelu, gelu_tanh)", name);
}

Pooling parse_pooling(const std::string& name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "tfidf") return Pooling::TfIdf;
  TANDEM_FAIL("unknown pooling '{}' (mean, cls, tfidf)", name);
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t n_heads, int64_t dim_feedforward,
                                                 double dropout, Activation activation, bool norm_first, Init& init)
    : dropout_(dropout), activation_(activation), norm_first_(norm_first) {
  self_attn_ = register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, n_heads, dropout, init));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward, true, init));
  linear2_ = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model, true, init));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(d_model));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(d_model));
}

// dropout(branch + bias) + residual, then (post-norm: `norm`) its layer norm, each one op with the bias
// fused in (kernels/bias_dropout_add.h, kernels/bias_dropout_add_layer_norm.h).
Tensor TransformerEncoderLayer::epilogue(const Tensor& branch, const Tensor& bias, const Tensor& residual,
                                         const LayerNorm* norm, ForwardContext& ctx) const {
  const uint64_t stream = ctx.next_dropout_stream();
  if (norm) return norm->forward_after_residual(branch, bias, residual, dropout_, is_training(), ctx, stream);
  return kernels::bias_dropout_add(branch, bias, residual, dropout_, is_training(), ctx.seed, stream, ctx.device_step);
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& residual, const Tensor& mask,
                                                     const LayerNorm* norm, ForwardContext& ctx) const {
  const ProductAndBias a = self_attn_->forward_leaving_out_bias(x, mask, ctx);
  return epilogue(a.product, a.bias, residual, norm, ctx);
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x, const Tensor& residual, const LayerNorm* norm,
                                                   ForwardContext& ctx) const {
  const ProductAndBias first = linear1_->forward_leaving_bias(x, ctx);
  Tensor h = first.product;
  // dropout(activation(h + b1)): with GELU one op (kernels/gelu.h), one kernel each way unless
  // TANDEM_GELU_DROPOUT=separate; the same dropout stream and bits either way.
  const uint64_t stream = ctx.next_dropout_stream();
  switch (activation_) {
    case Activation::Gelu:
    case Activation::GeluTanh: {
      const auto approx =
          activation_ == Activation::Gelu ? kernels::GeluApproximation::None : kernels::GeluApproximation::Tanh;
      h = kernels::bias_gelu_dropout(h, first.bias, approx, dropout_, is_training(), ctx.seed, stream,
                                     ctx.device_step);
      break;
    }
    case Activation::Relu:
      h = kernels::dropout(kernels::relu(kernels::add_bias(h, first.bias)), dropout_, is_training(), ctx.seed, stream,
                           ctx.device_step);
      break;
  }
  const ProductAndBias second = linear2_->forward_leaving_bias(h, ctx);
  return epilogue(second.product, second.bias, residual, norm, ctx);
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& key_padding_mask, ForwardContext& ctx) const {
  if (norm_first_) {
    Tensor h = self_attention_block(norm1_->forward(x, ctx), x, key_padding_mask, nullptr, ctx);
    return feed_forward_block(norm2_->forward(h, ctx), h, nullptr, ctx);
  }
  Tensor h = self_attention_block(x, x, key_padding_mask, norm1_.get(), ctx);
  return feed_forward_block(h, h, norm2_.get(), ctx);
}

Encoder::Encoder(const TextClassifierConfig& c, Init& init) {
  auto layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.num_layers; ++i) {
    layers_.push_back(layers->push_back(std::make_shared<TransformerEncoderLayer>(
        c.d_model, c.n_heads, c.dim_feedforward, c.dropout, c.activation, c.norm_first, init)));
  }
  if (c.norm_first) norm_ = register_module("norm", std::make_shared<LayerNorm>(c.d_model));
}

Tensor Encoder::forward(const Tensor& x, const Tensor& key_padding_mask, ForwardContext& ctx) const {
  Tensor h = x;
  for (const auto& layer : layers_) h = layer->forward(h, key_padding_mask, ctx);
  return norm_ ? norm_->forward(h, ctx) : h;
}

TextClassifier::TextClassifier(const TextClassifierConfig& config, uint64_t seed) : config_(config) {
  const auto& c = config_;
  TANDEM_CHECK(c.embedding_init_std > 0, "TextClassifier: embedding_init_std must be > 0, got {}", c.embedding_init_std);
  TANDEM_CHECK(c.vocab_size > 0 && c.num_classes > 1 && c.max_seq_len > 0 && c.num_layers >= 0,
               "TextClassifier: invalid configuration (vocab_size {}, num_classes {}, max_seq_len {}, num_layers {})",
               c.vocab_size, c.num_classes, c.max_seq_len, c.num_layers);
  Init init(seed);
  embed_ = register_module("embed", std::make_shared<TokenPositionEmbedding>(c.vocab_size, c.max_seq_len, c.d_model,
                                                                               c.position_embedding, init,
                                                                               c.embedding_init_std));
  encoder_ = register_module("encoder", std::make_shared<Encoder>(c, init));
  head_ = register_module("head", std::make_shared<Linear>(c.d_model, c.num_classes, true, init));
  if (c.pooling == Pooling::TfIdf) idf_ = register_buffer("idf", Tensor::full({c.vocab_size}, 1.0));
}

void TextClassifier::set_idf(const std::vector<float>& idf) {
  TANDEM_CHECK(idf_.defined(), "TextClassifier::set_idf: the model's pooling is not tfidf");
  TANDEM_CHECK(static_cast<int64_t>(idf.size()) == config_.vocab_size,
               "TextClassifier::set_idf: {} values for a vocabulary of {}", idf.size(), config_.vocab_size);
  idf_.copy_(Tensor::from_vector(idf, {config_.vocab_size}).to(idf_.device()));
}

Tensor TextClassifier::forward(const Tensor& ids, const Tensor& mask, ForwardContext& ctx) const {
  const ParameterCastScope casts(*this, ctx);  // TANDEM_PARAMETER_CASTS=batched: all at once
  Tensor x = embed_->forward(ids, ctx);
  x = kernels::dropout(x, config_.dropout, is_training(), ctx.seed, ctx.next_dropout_stream(), ctx.device_step);
  Tensor h = encoder_->forward(x, mask, ctx);
  Tensor pooled;
  switch (config_.pooling) {
    case Pooling::Mean: pooled = kernels::masked_mean_pool(h, mask); break;
    case Pooling::Cls: pooled = kernels::first_token_pool(h); break;
    case Pooling::TfIdf:
      pooled = kernels::weighted_sum_pool(h, kernels::tfidf_weights(ids, mask, idf_, config_.sublinear_tf));
      break;
  }
  return head_->forward(pooled, ctx);
}

}  // namespace tandem::nn
