// GradScaler: dynamic loss scaling for fp16 training (torch.amp.GradScaler).
//
// The loss is multiplied by `scale` before backward so small fp16 gradients
// do not flush to zero; before the optimizer step the f32 gradients are
// divided by it again and checked for inf/nan in one fused pass. A step whose
// gradients overflowed is skipped and the scale halved (backoff 0.5); after
// growth_interval (2000) clean steps in a row the scale doubles. Everything
// stays on the device: the scale, the growth tracker and each optimizer's
// found_inf flag are device tensors, the optimizer kernels read found_inf
// themselves, and update() runs as a one-thread kernel, so an iteration
// (scale, unscale_, step, update) never waits for the GPU. Only get_scale(),
// growth_tracker() and state_dict() read values back (for logging and checkpoints).
//
// bf16 and f32 share f32's exponent range and need no scaling: a disabled
// scaler (for_compute_dtype(BF16 or F32)) is a pass-through, so one training
// loop serves every precision.
//
// Per iteration, per optimizer: scale(loss).backward(); optionally unscale_(opt)
// (e.g. to clip); step(opt); then update() once. As in PyTorch, unscale_ twice
// or step twice before update() is an error, and so is update() with no step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace tandem::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  using Options = GradScalerOptions;
  // PyTorch's state_dict keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
  struct State {
    double scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
    int64_t growth_tracker = 0;
  };

  explicit GradScaler(Options options = {});
  // Enabled for f16 compute only.
  static GradScaler for_compute_dtype(DType compute_dtype, Options options = {});

  bool enabled() const { return options_.enabled; }

  // loss * scale as an f32 one-element tensor (a loss of another dtype is cast
  // to f32 first, so the scaled value cannot overflow fp16); differentiable.
  // The first call creates the scale on the loss's device. Disabled: returns loss.
  Tensor scale(const Tensor& loss);
  // Divides the optimizer's gradients by the scale and records whether any
  // was inf/nan, in one fused pass on the device.
  void unscale_(Optimizer& optimizer);
  // unscale_ if not done yet, then optimizer.step(found_inf): skipped on the device on inf/nan.
  void step(Optimizer& optimizer);
  // Backoff or growth from this iteration's found_inf flags (summed over the optimizers stepped).
  void update();
  // Sets the scale directly (PyTorch's update(new_scale)); the growth tracker is kept.
  void update(double new_scale);

  Tensor scale_tensor() const { return scale_; }  // undefined before the first scale()
  double get_scale() const;                        // reads the device (synchronises); 1 when disabled
  int64_t growth_tracker() const;                  // reads the device
  // This iteration's flag for `optimizer` (1 = inf/nan found), undefined before unscale_/step.
  Tensor found_inf(const Optimizer& optimizer) const;

  std::optional<State> state_dict() const;  // nullopt when disabled
  void load_state_dict(const State& state);  // no-op when disabled; validates the values

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    Tensor found_inf;
  };

  void check_started(const char* what) const;

  Options options_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_;           // f32 0-dim, on the loss's device
  Tensor growth_tracker_;  // i32 0-dim
  std::map<const Optimizer*, PerOptimizer> per_optimizer_;  // this iteration only
};

}  // namespace tandem::optim
