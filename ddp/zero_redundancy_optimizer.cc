#include "ddp/zero_redundancy_optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "ddp/comm_hook.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace tandem::ddp {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<std::vector<Tensor>> param_groups,
                                                 std::shared_ptr<comm::ProcessGroup> group,
                                                 const ShardOptimizerFactory& make_shard_optimizer,
                                                 std::chrono::milliseconds timeout)
    : group_(std::move(group)), timeout_(timeout) {
  TANDEM_CHECK(group_, "ZeroRedundancyOptimizer: no process group");
  Device device;
  bool first = true;
  std::vector<size_t> group_of;
  for (size_t g = 0; g < param_groups.size(); ++g) {
    for (size_t i = 0; i < param_groups[g].size(); ++i) {
      const Tensor& p = param_groups[g][i];
      TANDEM_CHECK(p.defined() && p.dtype() == DType::F32,
                   "ZeroRedundancyOptimizer: parameter {} of group {} must be a defined f32 tensor, got {}", i, g,
                   p.defined() ? p.str() : "undefined");
      if (first) device = p.device(), first = false;
      TANDEM_CHECK(p.device() == device, "ZeroRedundancyOptimizer: parameter {} of group {} is on {}, the first on {}",
                   i, g, p.device().str(), device.str());
      slots_.push_back({p, total_});
      group_of.push_back(g);
      total_ += p.numel();
    }
  }
  TANDEM_CHECK(total_ > 0, "ZeroRedundancyOptimizer: no parameter elements");
  const int world = group_->size(), rank = group_->rank();
  shard_size_ = (total_ + world - 1) / world;
  shard_begin_ = static_cast<int64_t>(rank) * shard_size_;
  const int64_t padded = shard_size_ * world;
  flat_grad_ = Tensor::zeros({padded}, DType::F32, device);
  flat_param_ = Tensor::zeros({padded}, DType::F32, device);
  shard_grad_ = Tensor::zeros({shard_size_}, DType::F32, device);
  shard_param_ = Tensor::zeros({shard_size_}, DType::F32, device);

  // Every rank starts from rank 0's parameters (what DDP's constructor does).
  pack_parameters(flat_param_);
  finish(group_->broadcast(flat_param_, 0), "broadcasting rank 0's parameters");
  unpack_parameters(flat_param_);
  shard_param_.copy_(flat_param_.view_range(shard_begin_, {shard_size_}));

  // The shard's pieces: each parameter's intersection with [shard_begin, shard_end).
  std::vector<ShardGroup> shard_groups;
  const int64_t shard_end = shard_begin_ + shard_size_;
  for (size_t k = 0; k < slots_.size(); ++k) {
    const int64_t lo = std::max(slots_[k].offset, shard_begin_);
    const int64_t hi = std::min(slots_[k].offset + slots_[k].param.numel(), shard_end);
    if (lo >= hi) continue;
    // A leaf of its own over the shard's storage: the shard optimizer updates shard_param_ in place.
    Tensor piece = shard_param_.view_range(lo - shard_begin_, {hi - lo}).detach().set_requires_grad(true);
    piece.set_grad(shard_grad_.view_range(lo - shard_begin_, {hi - lo}));
    if (shard_groups.empty() || shard_groups.back().group != group_of[k]) shard_groups.push_back({group_of[k], {}});
    shard_groups.back().pieces.push_back(piece);
    pieces_.push_back(piece);
  }
  if (!shard_groups.empty()) {
    shard_optimizer_ = make_shard_optimizer(shard_groups);
    TANDEM_CHECK(shard_optimizer_, "ZeroRedundancyOptimizer: the factory returned no optimizer");
  }
}

void ZeroRedundancyOptimizer::finish(const std::shared_ptr<comm::Work>& work, const char* what) const {
  TANDEM_CHECK(work->wait(timeout_), "ZeroRedundancyOptimizer (rank {}): timed out after {} ms {}", group_->rank(),
               timeout_.count(), what);
}

void ZeroRedundancyOptimizer::pack_parameters(Tensor& flat) const {
  for (const Slot& s : slots_) flat.view_range(s.offset, {s.param.numel()}).copy_(s.param.detach());
}

void ZeroRedundancyOptimizer::unpack_parameters(const Tensor& flat) {
  NoGradGuard no_grad;
  for (Slot& s : slots_) {
    Tensor dst = s.param.detach();  // same storage: the model sees the new values
    dst.copy_(flat.view_range(s.offset, s.param.shape()));
  }
}

void ZeroRedundancyOptimizer::reduce_scatter_gradients() {
  for (const Slot& s : slots_) {
    Tensor dst = flat_grad_.view_range(s.offset, {s.param.numel()});
    const Tensor g = s.param.grad();
    if (g.defined()) dst.copy_(g);
    else dst.zero_();
  }
  // Avg: the gradient of the mean loss over every rank's rows, as DDP's all-reduce gives.
  finish(group_->reduce_scatter(flat_grad_, shard_grad_, comm::ReduceOp::Avg), "reduce-scattering the gradients");
}

Tensor ZeroRedundancyOptimizer::clip_grad_norm_(double max_norm) {
  TANDEM_CHECK(max_norm >= 0.0, "ZeroRedundancyOptimizer: max_norm must be >= 0, got {}", max_norm);
  Tensor squares;
  {
    NoGradGuard no_grad;
    squares = kernels::sum(kernels::mul(shard_grad_, shard_grad_));  // padding is zero: adds nothing
  }
  finish(group_->all_reduce(squares, comm::ReduceOp::Sum), "summing the gradient norm");
  // One host read per step (the unsharded clip has none): the norm decides a host-side scale.
  const double norm = std::sqrt(squares.item());
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_in_place(shard_grad_, coef);
  return Tensor::from_vector(std::vector<double>{norm}, {}, DType::F32).to(shard_grad_.device());
}

void ZeroRedundancyOptimizer::step_and_gather() {
  if (shard_optimizer_) shard_optimizer_->step();
  finish(group_->all_gather(shard_param_, flat_param_), "all-gathering the parameters");
  unpack_parameters(flat_param_);
}

void ZeroRedundancyOptimizer::step() {
  reduce_scatter_gradients();
  step_and_gather();
}

void ZeroRedundancyOptimizer::zero_grad() {
  for (Slot& s : slots_) s.param.set_grad(Tensor());
}

int64_t ZeroRedundancyOptimizer::state_bytes() const {
  if (!shard_optimizer_) return 0;
  int64_t bytes = 0;
  for (const auto& [name, t] : shard_optimizer_->state_dict()) bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  return bytes;
}

}  // namespace tandem::ddp
