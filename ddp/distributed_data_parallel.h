// DistributedDataParallel: data parallelism for a Module across the ranks of
// a ProcessGroup.
//
// At construction it checks that every rank has the same parameters (names,
// shapes, dtypes, requires_grad), copies rank 0's parameters and buffers to
// all ranks, and checks that every rank has the same options (bucket caps,
// find_unused_parameters, static_graph, gradient_as_bucket_view, comm hook)
// and bucket layout; the layout is checked again after the bucket rebuild.
// The first mismatch is reported on every rank, naming the rank and the
// field, never a hang (ddp/rank_agreement.h). Each training step
// runs the forward pass through forward(), then loss.backward(): gradients
// are averaged across ranks by the Reducer while backward runs, and are in
// param.grad() when backward returns. no_sync() turns synchronisation off for
// gradient-accumulation micro-steps.
#pragma once

#include <functional>
#include <memory>

#include "comm/process_group.h"
#include "ddp/logging_data.h"
#include "ddp/reducer.h"
#include "nn/module.h"

namespace tandem::ddp {

struct DDPOptions {
  double bucket_cap_mb = 25.0;      // 0 = one bucket per parameter
  double first_bucket_cap_mb = 1.0;
  bool gradient_as_bucket_view = false;
  bool find_unused_parameters = false;
  bool static_graph = false;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  CommHook comm_hook;  // empty: allreduce_hook()
  std::shared_ptr<void> comm_hook_state;  // the hook's `state` argument (PyTorch's register_comm_hook(state, hook))
  std::string comm_hook_name;  // how logging_data() names comm_hook ("user" when empty with a hook set)
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<comm::ProcessGroup> group,
                          DDPOptions options = {});

  // Runs `forward` (the model's forward pass, returning its output) with DDP's
  // bookkeeping around it; with find_unused_parameters the output's graph is
  // searched for parameters this step does not use.
  Tensor forward(const std::function<Tensor()>& forward);

  class NoSyncGuard {
   public:
    explicit NoSyncGuard(Reducer& r) : reducer_(r), previous_(r.sync()) { r.set_sync(false); }
    ~NoSyncGuard() { reducer_.set_sync(previous_); }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    Reducer& reducer_;
    bool previous_;
  };
  // Within the guard's scope, backward accumulates gradients locally without communicating.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*reducer_); }

  nn::Module& module() { return *module_; }
  comm::ProcessGroup& group() { return *group_; }
  const IterationStats& stats() const { return reducer_->last_stats(); }
  const std::vector<BucketSpec>& buckets() const { return reducer_->buckets(); }
  // See Reducer: comm times that finish on the device, bucket contents by name, the end-of-autograd hook.
  const IterationStats& complete_stats() { return reducer_->complete_stats(); }
  std::vector<std::vector<std::string>> bucket_parameter_names() const { return reducer_->bucket_parameter_names(); }
  void set_autograd_end_hook(std::function<void()> hook) { reducer_->set_autograd_end_hook(std::move(hook)); }
  // The setup and the buckets as PyTorch's ddp_logging_data records them (ddp/logging_data.h).
  LoggingData logging_data() const;

 private:
  void verify_same_parameters_on_all_ranks();
  std::vector<Field> option_fields() const;  // the options every rank must share
  std::string comm_hook_name() const;
  void broadcast_from_rank0();

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<comm::ProcessGroup> group_;
  DDPOptions options_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<int64_t> initial_bucket_sizes_;
};

}  // namespace tandem::ddp
