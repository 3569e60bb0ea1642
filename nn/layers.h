// The layers a transformer text classifier is built from, each a Module whose
// parameter names and initialisation follow the PyTorch module of the same
// role, so state dicts carry over:
//   TokenPositionEmbedding  token.weight [V, D], position.weight [P, D]   (nn.Embedding: N(0, 1));
//                           no position.weight when built without positions
//   LayerNorm               weight [D] = 1, bias [D] = 0                   (nn.LayerNorm)
//   MultiheadAttention      in_proj_weight [3D, D] (Xavier uniform), in_proj_bias [3D] = 0,
//                           out_proj.weight [D, D] (nn.Linear init), out_proj.bias [D] = 0
// Forward passes take the ForwardContext (compute dtype, training mode,
// dropout stream). Parameters are cast to the compute dtype inside forward,
// except LayerNorm's, which the kernel reads in f32 directly.
#pragma once

#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tandem::nn {

// nn.Embedding's parameter holder: weight [num, dim] ~ N(0, 1). The lookup is
// done by TokenPositionEmbedding, which sums the token and position rows in one kernel.
class Embedding : public Module {
 public:
  // Rows drawn from N(0, init_std^2): 1 is nn.Embedding's default.
  Embedding(int64_t num, int64_t dim, Init& init, double init_std = 1.0) {
    weight_ = register_parameter("weight", init.normal({num, dim}, 0.0, init_std));
  }
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

class TokenPositionEmbedding : public Module {
 public:
  // positions false: token embeddings only (position_ stays null, nothing registered).
  TokenPositionEmbedding(int64_t vocab_size, int64_t max_seq_len, int64_t d_model, bool positions, Init& init,
                         double init_std = 1.0);
  // ids [B, S] (i32/i64) -> [B, S, D] in the compute dtype; the sum is taken in f32.
  Tensor forward(const Tensor& ids, ForwardContext& ctx) const;

 private:
  int64_t max_seq_len_;
  std::shared_ptr<Embedding> token_, position_;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t d, double eps = 1e-5);
  Tensor forward(const Tensor& x, ForwardContext& ctx) const;
  // forward(dropout(x + bias) + residual) as one op (kernels/bias_dropout_add_layer_norm.h): a
  // post-norm sublayer's epilogue; its dropout (when `training`) on the stream `subsequence`.
  Tensor forward_after_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, double p, bool training,
                                ForwardContext& ctx, uint64_t subsequence) const;

 private:
  Tensor weight_, bias_;
  double eps_;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t d_model, int64_t n_heads, double dropout, Init& init);
  // Self-attention over x [B, S, D] with key_padding_mask [B, S] u8 (1 = token);
  // returns the output projection *without* its bias, and the bias, which the
  // caller fuses into its bias + dropout + residual epilogue
  // (Linear::forward_leaving_bias).
  ProductAndBias forward_leaving_out_bias(const Tensor& x, const Tensor& key_padding_mask, ForwardContext& ctx) const;

 private:
  int64_t n_heads_;
  double dropout_;
  Tensor in_proj_weight_, in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
};

}  // namespace tandem::nn
