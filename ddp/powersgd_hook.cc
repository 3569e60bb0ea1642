#include "ddp/powersgd_hook.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/random.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/transpose.h"

namespace tandem::ddp {

namespace {
// A column whose residual after orthogonalisation is below this fraction of its
// length lies in the span of the previous ones up to f64 rounding (f32 data
// leaves residuals near 1e-7 where a real new direction exists).
constexpr double kDependentColumn = 1e-10;
}  // namespace

PowerSGDState::PowerSGDState(PowerSGDOptions options) : options_(options) {
  const PowerSGDOptions& o = options_;
  TANDEM_CHECK(o.matrix_approximation_rank >= 1, "PowerSGD: matrix_approximation_rank must be >= 1, got {}",
               o.matrix_approximation_rank);
  TANDEM_CHECK(o.start_powerSGD_iter >= 0, "PowerSGD: start_powerSGD_iter must be >= 0, got {}",
               o.start_powerSGD_iter);
  TANDEM_CHECK(!(o.use_error_feedback || o.warm_start) || o.start_powerSGD_iter > 1,
               "PowerSGD: start_powerSGD_iter must be > 1 with error feedback or warm start (got {}): DDP rebuilds "
               "its buckets after the first iteration, and each bucket's memory is kept by bucket index",
               o.start_powerSGD_iter);
  TANDEM_CHECK(o.min_compression_rate >= 0, "PowerSGD: min_compression_rate must be >= 0, got {}",
               o.min_compression_rate);
  TANDEM_CHECK(o.orthogonalization_epsilon >= 0, "PowerSGD: orthogonalization_epsilon must be >= 0, got {}",
               o.orthogonalization_epsilon);
}

void PowerSGDState::count_iteration(const GradBucket& bucket) {
  if (bucket.is_last) ++iteration_;
}

Tensor PowerSGDState::error(int index) const {
  const auto it = buckets_.find(index);
  return it == buckets_.end() ? Tensor() : it->second.error;
}

void orthogonalize_columns(std::vector<double>& a, int64_t rows, int64_t cols, double epsilon) {
  auto at = [&](int64_t r, int64_t c) -> double& { return a[static_cast<size_t>(r * cols + c)]; };
  auto dot = [&](int64_t i, int64_t j) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += at(r, i) * at(r, j);
    return s;
  };
  for (int64_t i = 0; i < cols; ++i) {
    const double original = std::sqrt(dot(i, i));
    // Two passes ("twice is enough"): after one, a column that was nearly in the
    // span of the previous ones keeps a rounding residual that is not orthogonal to them.
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t j = 0; j < i; ++j) {
        const double c = dot(j, i);
        for (int64_t r = 0; r < rows; ++r) at(r, i) -= c * at(r, j);
      }
    const double norm = std::sqrt(dot(i, i));
    if (norm <= kDependentColumn * original) {  // no new direction: a zero column, not amplified noise
      for (int64_t r = 0; r < rows; ++r) at(r, i) = 0;
      continue;
    }
    for (int64_t r = 0; r < rows; ++r) at(r, i) /= norm + epsilon;
  }
}

namespace {

// One gradient of the bucket that is compressed: M [n, m] -> P [n, r], Q [m, r].
struct Compressed {
  Tensor m;       // view of the bucket
  int64_t n = 0, cols = 0, rank = 0;
  int64_t p_offset = 0;  // in the first all-reduce's buffer, after the exact part
  int64_t q_offset = 0;  // in the bucket's Q memory
};

// PyTorch's _should_compress.
bool worth_compressing(int64_t n, int64_t m, int64_t rank, double min_rate) {
  return static_cast<double>((n + m) * rank) * min_rate < static_cast<double>(n * m);
}

void wait_for(const std::shared_ptr<comm::Work>& work) {
  // The backend's own op timeout ends every op (completed or failed, which throws here).
  while (!work->wait(std::chrono::seconds(10))) {
  }
}

}  // namespace

CommHook powerSGD_hook() {
  return [](void* state_ptr, comm::ProcessGroup& group, GradBucket& bucket) -> PendingReduction {
    TANDEM_CHECK(state_ptr != nullptr, "PowerSGD: the hook needs a PowerSGDState as DDPOptions::comm_hook_state");
    auto& st = *static_cast<PowerSGDState*>(state_ptr);
    const PowerSGDOptions& o = st.options_;
    const double world = group.size();
    NoGradGuard no_grad;
    Tensor input = bucket.buffer;
    st.numel_before_ += input.numel();

    if (st.iteration_ < o.start_powerSGD_iter) {  // plain average (allreduce_hook)
      st.count_iteration(bucket);
      st.numel_after_ += input.numel();
      scale_in_place(input, 1.0 / world);
      return PendingReduction{group.all_reduce(input, comm::ReduceOp::Sum), {}};
    }

    PowerSGDState::BucketMemory& memory = st.buckets_[bucket.index];
    Tensor input_copy;
    if (o.use_error_feedback) {
      if (memory.error.defined() && memory.error.numel() == input.numel())
        input.copy_(kernels::add(input, memory.error));
      else
        memory.error = Tensor::zeros(input.shape(), input.dtype(), input.device());
      input_copy = input.clone();
    }

    // Which gradients are compressed; the rest travel exactly.
    std::vector<Tensor> exact;
    std::vector<Compressed> compressed;
    int64_t exact_numel = 0, p_numel = 0, q_numel = 0;
    for (const Tensor& g : bucket.gradients()) {
      const int64_t n = g.dim() >= 2 ? g.size(0) : 0, cols = n > 0 ? g.numel() / n : 0;
      const int64_t rank = std::min({o.matrix_approximation_rank, n, cols});
      if (g.dim() < 2 || rank == 0 || !worth_compressing(n, cols, rank, o.min_compression_rate)) {
        exact.push_back(g);
        exact_numel += g.numel();
        continue;
      }
      compressed.push_back({g.view_range(0, {n, cols}), n, cols, rank, /*p_offset, set below*/ 0, q_numel});
      p_numel += n * rank;
      q_numel += cols * rank;
    }
    for (int64_t at = exact_numel; Compressed& c : compressed) {
      c.p_offset = at;
      at += c.n * c.rank;
    }

    // Q: warm-started from the previous iteration, else drawn (the same on every rank).
    if (!o.warm_start || !memory.q.defined() || memory.q.numel() != q_numel) {
      Tensor q = Tensor::empty({q_numel}, input.dtype(), Device::cpu());
      if (q_numel > 0) fill_normal(q, o.random_seed, st.draws_++);
      memory.q = q.to(input.device());
    }

    // First all-reduce: the exact part, then every P = M Q.
    Tensor first = Tensor::empty({exact_numel + p_numel}, input.dtype(), input.device());
    int64_t at = 0;
    for (const Tensor& g : exact) {
      first.view_range(at, g.shape()).copy_(g);
      at += g.numel();
    }
    for (const Compressed& c : compressed) {
      const Tensor q = memory.q.view_range(c.q_offset, {c.cols, c.rank});
      first.view_range(c.p_offset, {c.n, c.rank}).copy_(kernels::linear(c.m, kernels::transpose(q)));
    }
    st.numel_after_ += exact_numel + p_numel + q_numel;
    auto work = group.all_reduce(first, comm::ReduceOp::Sum);

    auto finish = [&st, &group, bucket, first, exact, compressed, input, input_copy, world, exact_numel]() {
      NoGradGuard no_grad;
      const PowerSGDOptions& o = st.options_;
      PowerSGDState::BucketMemory& memory = st.buckets_[bucket.index];
      // The exact part: the average, back into the bucket.
      int64_t at = 0;
      for (const Tensor& g : exact) {
        Tensor sum = first.view_range(at, g.shape());
        Tensor(g).copy_(kernels::scale(sum, 1.0 / world));
        at += g.numel();
      }
      if (!compressed.empty()) {
        // P: summed, not divided (it is orthonormalised anyway), orthogonalised on the host.
        Tensor p_all = first.view_range(exact_numel, {first.numel() - exact_numel});
        std::vector<double> p_host = p_all.to_double_vector();
        for (const Compressed& c : compressed) {
          std::vector<double> one(p_host.begin() + (c.p_offset - exact_numel),
                                  p_host.begin() + (c.p_offset - exact_numel + c.n * c.rank));
          orthogonalize_columns(one, c.n, c.rank, o.orthogonalization_epsilon);
          std::copy(one.begin(), one.end(), p_host.begin() + (c.p_offset - exact_numel));
        }
        p_all.copy_(Tensor::from_vector(p_host, p_all.shape(), p_all.dtype(), Device::cpu()).to(p_all.device()));
        // Q = M^T P, summed over ranks, divided by the world size.
        for (const Compressed& c : compressed) {
          const Tensor p = first.view_range(c.p_offset, {c.n, c.rank});
          memory.q.view_range(c.q_offset, {c.cols, c.rank})
              .copy_(kernels::linear(kernels::transpose(c.m), kernels::transpose(p)));
        }
        wait_for(group.all_reduce(memory.q, comm::ReduceOp::Sum));
        scale_in_place(memory.q, 1.0 / world);
        // M = P Q^T: the approximation of the average.
        for (const Compressed& c : compressed) {
          const Tensor p = first.view_range(c.p_offset, {c.n, c.rank});
          const Tensor q = memory.q.view_range(c.q_offset, {c.cols, c.rank});
          Tensor(c.m).copy_(kernels::linear(p, q));
        }
      }
      if (o.use_error_feedback)  // this rank's loss: its input minus what it applies
        memory.error = kernels::add(input_copy, kernels::scale(input, -1.0));
      if (!o.warm_start) memory.q = Tensor();
      st.count_iteration(bucket);
    };
    return PendingReduction{work, finish};
  };
}

}  // namespace tandem::ddp
