// The Reducer: DDP's gradient bucketer (PyTorch's c10d::Reducer).
//
// It groups parameters into flat buckets, hooks every parameter's
// post-accumulate-grad event, and as soon as every gradient of a bucket is
// complete launches that bucket's reduction, in bucket order, while backward
// keeps computing the rest. At the end of backward it waits for all
// reductions (on the device: the compute stream waits on the comm stream, the
// host does not block) and leaves the averaged gradients in param.grad().
//
// One iteration is: prepare_forward(), the forward pass,
// prepare_backward(outputs), loss.backward(). DistributedDataParallel drives it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/process_group.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "ddp/bucket_assignment.h"
#include "ddp/comm_hook.h"
#include "ddp/rank_agreement.h"
#include "ddp/stats.h"

namespace tandem::ddp {

struct ReducerOptions {
  size_t first_bucket_bytes = 1u << 20;  // PyTorch's default first bucket (1 MiB)
  size_t bucket_bytes = 25u << 20;       // bucket_cap_mb
  bool gradient_as_bucket_view = false;
  bool find_unused_parameters = false;
  bool static_graph = false;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Empty: the built-in average (allreduce_hook()'s result), with the division
  // by the world size fused into the copy of each gradient into its bucket.
  CommHook comm_hook;
  std::shared_ptr<void> comm_hook_state;  // handed to every call of comm_hook
  // What the ranks must agree on besides the bucket layout (DDP's options):
  // checked again, with the layout, after the rebuild.
  std::vector<Field> setup_fields;
};

class Reducer {
 public:
  // `params` in registration order (names for messages and stats).
  Reducer(std::vector<std::pair<std::string, Tensor>> params, std::shared_ptr<comm::ProcessGroup> group,
          ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void prepare_forward();
  void prepare_backward(const std::vector<Tensor>& outputs);
  // While false (no_sync), backward only accumulates gradients locally.
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }

  const IterationStats& last_stats() const { return stats_; }
  const std::vector<BucketSpec>& buckets() const { return layout_; }
  // The layout as rank agreement compares it: the bucket count, then each
  // bucket's dtype, bytes and parameter indices (not the device: NCCL ranks
  // each hold their own GPU).
  std::vector<Field> layout_fields() const;
  bool buckets_rebuilt() const { return rebuilt_; }
  int64_t iterations() const { return iteration_; }  // synchronised iterations finished
  // The names of each bucket's parameters, in bucket order (for traces).
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

  // Called on synchronised iterations when the autograd pass is over, before the
  // Reducer waits for the buckets' reductions (a profiler marks the start of the
  // exposed communication wait there). Runs on the thread that called backward.
  void set_autograd_end_hook(std::function<void()> hook) { autograd_end_hook_ = std::move(hook); }

  // Waits, up to the timeout, for the last synchronised iteration's reductions
  // and fills in their comm times and the overlap (last_stats().comm_complete).
  // Needed only where reductions complete on the device (NCCL); call it after
  // the host has synchronised with the device so that it does not block.
  // After the next backward has begun it has nothing left to complete.
  const IterationStats& complete_stats();

 private:
  enum class Phase { Idle, Forward, Backward };
  struct Bucket {
    BucketSpec spec;
    Tensor buffer;
    std::vector<int64_t> offsets;  // element offset of each parameter in buffer
    GradBucket hook_view;          // what the comm hook is given (is_last set at launch)
    int pending = 0;
    bool launched = false;
    PendingReduction reduction;
    std::chrono::steady_clock::time_point ready_at;
    // device_timing(): recorded on the comm stream around the hook's launch.
    std::optional<cuda::Event> comm_start, comm_end;
  };
  struct Param {
    std::string name;
    Tensor tensor;
    std::shared_ptr<AccumulateGrad> accumulator;  // holds the hook that marks it ready
    uint64_t hook = 0;
    int bucket = -1;
    int slot = -1;  // index within the bucket
    bool ready = false;
    bool reached = false;          // backward reached it in this (synchronising) iteration
    bool used = false;             // ... and it then held a gradient
    bool used_in_no_sync = false;  // ... or in a no_sync micro-step since the last synchronised one
    std::chrono::steady_clock::time_point ready_at;  // when its hook fired (or it was marked unused) this backward
  };

  std::vector<ParamDesc> param_descs() const;
  void build_buckets(std::vector<BucketSpec> layout);
  void rebuild_buckets();
  Device comm_device() const;
  void on_gradient_ready(int index);
  void mark_ready(int index);
  void fill_bucket_view(Tensor& view, const Tensor& grad, bool in_place) const;
  PendingReduction reduce(GradBucket& bucket);
  void launch_ready_buckets();
  void finalize();
  Tensor bucket_view(int index) const;
  void record_stats(std::chrono::steady_clock::time_point end_of_autograd);
  void record_comm_stats(IterationStats& s) const;
  // Times from CUDA events rather than host clocks: parameters on a GPU and a
  // backend whose ops run on the stream (NCCL). With the ring, CUDA buckets
  // are reduced on the host, whose Work stamps are then the true times.
  bool device_timing() const;
  // The events' times relative to the start of backward; false while one has not completed.
  bool device_times(IterationStats& s) const;

  std::vector<Param> params_;
  std::shared_ptr<comm::ProcessGroup> group_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<BucketSpec> layout_;
  int next_to_launch_ = 0;
  bool finalize_queued_ = false;
  Phase phase_ = Phase::Idle;
  bool sync_ = true;
  bool has_device_params_ = false;
  // This iteration's backward is being captured into a CUDA graph (train/graph_step.h): no
  // device timing, since an event recorded during capture can be neither queried nor timed.
  bool capturing_ = false;
  cuda::Stream comm_stream_;

  // Bucket rebuilding (once, after the first synchronised iteration).
  bool rebuilt_ = false;
  bool rebuild_due_ = false;
  std::vector<int> ready_order_;

  // static_graph: the unused set found in the first iteration, reused afterwards.
  bool unused_known_ = false;
  std::vector<bool> static_unused_;
  // find_unused_parameters / static_graph: how many ranks used each parameter.
  // The map's all-reduce is issued as the last bucket launches (every hook has
  // run by then) and read in finalize(); with static_graph, only in the first
  // synchronised iteration, then cached: no per-step host wait for it.
  void launch_used_map();
  std::vector<int64_t> global_used();
  Tensor used_map_;
  std::shared_ptr<comm::Work> used_work_;
  std::vector<int64_t> static_global_used_;

  int64_t iteration_ = 0;
  std::chrono::steady_clock::time_point forward_start_, backward_start_;
  std::optional<cuda::Event> backward_start_event_, autograd_end_event_;  // compute stream; device_timing()
  IterationStats stats_;
  bool reductions_of_stats_ = false;  // buckets_ still hold the reductions stats_ describes
  std::function<void()> autograd_end_hook_;
};

}  // namespace tandem::ddp
