#include "nn/layers.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/bias_dropout_add_layer_norm.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/layer_norm.h"
#include "kernels/linear.h"
#include "nn/parameter_casts.h"

namespace tandem::nn {

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab_size, int64_t max_seq_len, int64_t d_model,
                                               bool positions, Init& init, double init_std)
    : max_seq_len_(max_seq_len) {
  token_ = register_module("token", std::make_shared<Embedding>(vocab_size, d_model, init, init_std));
  if (positions)
    position_ = register_module("position", std::make_shared<Embedding>(max_seq_len, d_model, init, init_std));
}

Tensor TokenPositionEmbedding::forward(const Tensor& ids, ForwardContext& ctx) const {
  // Gather from the f32 tables and cast the [B, S, D] result: cheaper than casting
  // the whole vocabulary table every step, and the table gradients stay f32.
  const Tensor& tok = token_->weight();
  // No positions: the one embedding op with an all-zero position table of the batch's length,
  // a constant (no gradient is formed for it), so the sum is the token row alone.
  TANDEM_CHECK(ids.dim() == 2 && ids.size(1) <= max_seq_len_, "embedding: ids must be [batch, seq <= {}], got {}",
               max_seq_len_, ids.str());
  const Tensor pos = position_ ? position_->weight() : Tensor::zeros({ids.size(1), tok.size(1)}, tok.dtype(), tok.device());
  Tensor x = kernels::embedding(ids, tok, pos);
  return x.dtype() == ctx.compute_dtype ? x : kernels::cast(x, ctx.compute_dtype);
}

LayerNorm::LayerNorm(int64_t d, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::full({d}, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros({d}));
}

Tensor LayerNorm::forward(const Tensor& x, ForwardContext& ctx) const {
  // layer_norm reads f32 weights for 16-bit x: no cast, f32 gradients.
  if (x.dtype() == DType::F64) return kernels::layer_norm(x, kernels::cast(weight_, DType::F64), kernels::cast(bias_, DType::F64), eps_);
  return kernels::layer_norm(x, weight_, bias_, eps_);
}

Tensor LayerNorm::forward_after_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, double p,
                                         bool training, ForwardContext& ctx, uint64_t subsequence) const {
  const bool f64 = x.dtype() == DType::F64;
  return kernels::bias_dropout_add_layer_norm(x, bias, residual, p, training, ctx.seed, subsequence,
                                              ctx.device_step, f64 ? kernels::cast(weight_, DType::F64) : weight_,
                                              f64 ? kernels::cast(bias_, DType::F64) : bias_, eps_);
}

MultiheadAttention::MultiheadAttention(int64_t d_model, int64_t n_heads, double dropout, Init& init)
    : n_heads_(n_heads), dropout_(dropout) {
  TANDEM_CHECK(n_heads > 0 && d_model % n_heads == 0, "MultiheadAttention: d_model {} is not divisible by {} heads",
               d_model, n_heads);
  // Xavier uniform over the packed [3D, D] matrix, as PyTorch's _reset_parameters.
  const double bound = std::sqrt(6.0 / static_cast<double>(3 * d_model + d_model));
  in_proj_weight_ = register_parameter("in_proj_weight", init.uniform({3 * d_model, d_model}, bound),
                                       ParameterUse::CastToComputeDtype);
  in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * d_model}), ParameterUse::CastToComputeDtype);
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, true, init));
  NoGradGuard no_grad;
  Tensor b = out_proj_->bias();
  b.zero_();  // PyTorch zeroes out_proj.bias
}

ProductAndBias MultiheadAttention::forward_leaving_out_bias(const Tensor& x, const Tensor& key_padding_mask,
                                                          ForwardContext& ctx) const {
  Tensor qkv = kernels::linear(x, linear_parameter(in_proj_weight_, ctx), linear_parameter(in_proj_bias_, ctx));
  const double p = is_training() ? dropout_ : 0.0;
  const uint64_t stream = ctx.next_dropout_stream();
  Tensor heads =
      kernels::attention(qkv, key_padding_mask, static_cast<int>(n_heads_), p, ctx.seed, stream, ctx.device_step);
  return out_proj_->forward_leaving_bias(heads, ctx);
}

}  // namespace tandem::nn
