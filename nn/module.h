// Module: a tree of named parameters, buffers and child modules.
//
// Names are hierarchical and stable, built from registration names joined by
// dots in registration order, depth first ("encoder.layers.3.self_attn.
// in_proj_weight"); they key the state dict, checkpoints, DDP's cross-rank
// shape check and error messages (each parameter tensor carries its name).
// Parameters are f32 master tensors that require grad; mixed precision casts
// them per forward (see ForwardContext).
//
// There is no virtual forward: each module's forward takes what it needs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "core/tensor.h"

namespace tandem::nn {

class ParameterCasts;

// Per-forward settings every module sees: precision and the dropout RNG
// (train/eval mode is the module's own flag, set by Module::train).
struct ForwardContext {
  DType compute_dtype = DType::F32;  // f32, bf16 or f16; parameters stay f32
  // Null, or this forward's compute-dtype copies of the cast parameters, made at once
  // (TANDEM_PARAMETER_CASTS=batched: nn/parameter_casts.h); as_compute reads them.
  ParameterCasts* casts = nullptr;
  uint64_t seed = 0;  // Philox key for dropout
  uint64_t step = 0;  // the optimizer step: dropout masks differ per step
  uint64_t calls = 0;  // dropout calls so far in this forward
  // Null, or the step count as an i64 in the parameters' memory space (a
  // capturable step: a replayed CUDA graph must read the step, not freeze it).
  // Then `step` is unused and the kernels combine *device_step with the call.
  const int64_t* device_step = nullptr;

  // A Philox subsequence unique to this (step, call): masks never repeat within
  // a run, and a resumed run draws the same masks as an uninterrupted one. With
  // device_step, only the call's part; pass device_step to the dropout kernel
  // too (kernels/dropout_mask.h: dropout_subsequence gives the same value).
  uint64_t next_dropout_stream() {
    const uint64_t call = calls++ & 0xffff;
    return device_step ? call : (step << 16) | call;
  }
};

// How forward uses a parameter: as the f32 master it is (layer norm's weights, the embedding
// tables), or cast to the compute dtype (as_compute: the linears' weights and biases).
enum class ParameterUse { AsStored, CastToComputeDtype };

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t num_parameters() const;
  // The parameters registered as CastToComputeDtype, in named_parameters' order.
  std::vector<Tensor> cast_parameters() const;

  void train(bool on = true);
  bool is_training() const { return training_; }

  // Parameters then buffers, by name, sharing storage with the module (no copy).
  NamedTensors state_dict() const;
  // Copies values in by name. strict: every parameter and buffer must be present
  // and nothing else may be; shapes must match; dtypes are converted.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  // Moves every parameter and buffer to `device`, keeping the tensors' identity.
  void to(Device device);

 protected:
  // Both return a handle sharing the registered tensor's state (keep it as a member).
  Tensor register_parameter(const std::string& name, Tensor value, ParameterUse use = ParameterUse::AsStored);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, bool params, std::vector<std::pair<std::string, Tensor>>& out) const;
  static void check_name(const std::string& name);

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<ParameterUse> param_uses_;  // params_[i]'s
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Children named "0", "1", ... (PyTorch's nn.ModuleList), for stacks of layers.
class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(std::to_string(size_++), std::move(module));
  }
  int64_t size() const { return size_; }

 private:
  int64_t size_ = 0;
};

}  // namespace tandem::nn
