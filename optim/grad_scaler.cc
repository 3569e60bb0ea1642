#include "optim/grad_scaler.h"

#include <cmath>

#include "core/check.h"
#include "kernels/device_stream.h"
#include "kernels/elementwise.h"
#include "optim/cpu/amp_cpu.h"

#if TANDEM_WITH_CUDA
#include "optim/cuda/amp_cuda.h"
#endif

namespace tandem::optim {

namespace {

void check_factors(double growth_factor, double backoff_factor, int64_t growth_interval) {
  TANDEM_CHECK(growth_factor > 1.0, "GradScaler: growth_factor must be > 1, got {}", growth_factor);
  TANDEM_CHECK(backoff_factor > 0.0 && backoff_factor < 1.0, "GradScaler: backoff_factor must be in (0, 1), got {}",
               backoff_factor);
  TANDEM_CHECK(growth_interval >= 1, "GradScaler: growth_interval must be >= 1, got {}", growth_interval);
}

bool positive_finite(double v) { return std::isfinite(v) && v > 0.0; }

}  // namespace

GradScaler::GradScaler(Options options) : options_(options) {
  if (!options_.enabled) return;
  TANDEM_CHECK(positive_finite(options_.init_scale), "GradScaler: init_scale must be positive and finite, got {}",
               options_.init_scale);
  check_factors(options_.growth_factor, options_.backoff_factor, options_.growth_interval);
}

GradScaler GradScaler::for_compute_dtype(DType compute_dtype, Options options) {
  options.enabled = compute_dtype == DType::F16;
  return GradScaler(options);
}

void GradScaler::check_started(const char* what) const {
  TANDEM_CHECK(scale_.defined(), "GradScaler.{}: no scale yet: call scale(loss) (and backward) earlier in the iteration",
               what);
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!enabled()) return loss;
  TANDEM_CHECK(loss.defined() && loss.numel() == 1 && is_floating(loss.dtype()),
               "GradScaler.scale: expected a one-element floating loss, got {}",
               loss.defined() ? loss.str() : std::string("undefined"));
  if (!scale_.defined()) {
    scale_ = Tensor::full({}, options_.init_scale, DType::F32, loss.device());
    growth_tracker_ = Tensor::full({}, static_cast<double>(init_growth_tracker_), DType::I32, loss.device());
  }
  TANDEM_CHECK(loss.device() == scale_.device(), "GradScaler.scale: loss on {} but the scale lives on {}",
               loss.device().str(), scale_.device().str());
  Tensor l = loss.dtype() == DType::F32 ? loss : kernels::cast(loss, DType::F32);
  Tensor factor = l.shape() == scale_.shape() ? scale_ : scale_.reshape(l.shape());
  return kernels::mul(l, factor);
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled()) return;
  check_started("unscale_");
  PerOptimizer& per = per_optimizer_[&optimizer];
  TANDEM_CHECK(per.stage != Stage::Unscaled,
               "GradScaler.unscale_: already called for this optimizer since the last update()");
  TANDEM_CHECK(per.stage != Stage::Stepped, "GradScaler.unscale_: called after step(); call update() first");
  TANDEM_CHECK(optimizer.device() == scale_.device(), "GradScaler.unscale_: the optimizer's parameters are on {} but "
               "the scale lives on {}", optimizer.device().str(), scale_.device().str());
  TensorList grads;
  for (Tensor& g : optimizer.grads()) {
    TensorListEntry e;
    e.ptr[0] = static_cast<float*>(g.data_ptr());
    e.numel = g.numel();
    grads.push_back(e);
    g.bump_version();
  }
  per.found_inf = Tensor::zeros({}, DType::F32, scale_.device());
  const auto* scale = static_cast<const float*>(scale_.data_ptr());
  auto* found = static_cast<float*>(per.found_inf.data_ptr());
  if (scale_.device().is_cpu()) {
    unscale_and_check_cpu(grads, scale, found);
  } else {
    TANDEM_CUDA_ONLY(unscale_and_check_cuda(grads, scale, found, kernels::stream_of(scale_)));
  }
  per.stage = Stage::Unscaled;
}

void GradScaler::step(Optimizer& optimizer) {
  if (!enabled()) {
    optimizer.step();
    return;
  }
  check_started("step");
  PerOptimizer& per = per_optimizer_[&optimizer];
  TANDEM_CHECK(per.stage != Stage::Stepped, "GradScaler.step: already called since the last update()");
  if (per.stage == Stage::Ready) unscale_(optimizer);
  optimizer.step(per.found_inf);
  per.stage = Stage::Stepped;
}

void GradScaler::update() {
  if (!enabled()) return;
  check_started("update");
  Tensor found;
  for (const auto& [opt, per] : per_optimizer_) {
    if (!per.found_inf.defined()) continue;
    found = found.defined() ? kernels::add(found, per.found_inf) : per.found_inf;
  }
  TANDEM_CHECK(found.defined(), "GradScaler.update: no inf checks were recorded: call step() (or unscale_()) first");
  auto* scale = static_cast<float*>(scale_.data_ptr());
  auto* tracker = static_cast<int32_t*>(growth_tracker_.data_ptr());
  const auto* flag = static_cast<const float*>(found.data_ptr());
  if (scale_.device().is_cpu()) {
    update_scale_cpu(scale, tracker, flag, options_.growth_factor, options_.backoff_factor, options_.growth_interval);
  } else {
    TANDEM_CUDA_ONLY(update_scale_cuda(scale, tracker, flag, options_.growth_factor, options_.backoff_factor,
                                       options_.growth_interval, kernels::stream_of(scale_)));
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled()) return;
  check_started("update");
  TANDEM_CHECK(positive_finite(new_scale), "GradScaler.update: new_scale must be positive and finite, got {}",
               new_scale);
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled()) return 1.0;
  return scale_.defined() ? scale_.item() : options_.init_scale;
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled()) return 0;
  return growth_tracker_.defined() ? static_cast<int64_t>(growth_tracker_.item()) : init_growth_tracker_;
}

Tensor GradScaler::found_inf(const Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it == per_optimizer_.end() ? Tensor() : it->second.found_inf;
}

std::optional<GradScaler::State> GradScaler::state_dict() const {
  if (!enabled()) return std::nullopt;
  return State{get_scale(), options_.growth_factor, options_.backoff_factor, options_.growth_interval,
               growth_tracker()};
}

void GradScaler::load_state_dict(const State& state) {
  if (!enabled()) return;
  TANDEM_CHECK(positive_finite(state.scale), "GradScaler.load_state_dict: scale must be positive and finite, got {}",
               state.scale);
  check_factors(state.growth_factor, state.backoff_factor, state.growth_interval);
  TANDEM_CHECK(state.growth_tracker >= 0 && state.growth_tracker < state.growth_interval,
               "GradScaler.load_state_dict: growth tracker {} outside [0, growth_interval {})", state.growth_tracker,
               state.growth_interval);
  options_.init_scale = state.scale;
  options_.growth_factor = state.growth_factor;
  options_.backoff_factor = state.backoff_factor;
  options_.growth_interval = state.growth_interval;
  init_growth_tracker_ = state.growth_tracker;
  if (scale_.defined()) {
    scale_.fill_(state.scale);
    growth_tracker_.fill_(static_cast<double>(state.growth_tracker));
  }
}

}  // namespace tandem::optim
