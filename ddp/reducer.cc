#include "ddp/reducer.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/check.h"
#include "core/cuda_graph.h"
#include "core/elapsed.h"

namespace tandem::ddp {

namespace {

using Clock = std::chrono::steady_clock;

bool is_view_into(const Tensor& t, const Tensor& view) {
  return t.defined() && t.storage() == view.storage() && t.offset_bytes() == view.offset_bytes() &&
         t.shape() == view.shape();
}

// Leaves reachable from `outputs` through the autograd graph.
std::vector<bool> reachable_params(const std::vector<Tensor>& outputs,
                                   const std::unordered_map<TensorImpl*, int>& index_of, size_t count) {
  std::vector<bool> used(count, false);
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  auto visit_edge = [&](const Edge& e) {
    if (!e.valid() || seen[e.fn.get()]) return;
    seen[e.fn.get()] = true;
    stack.push_back(e.fn.get());
  };
  for (const Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (out.grad_fn()) {
      visit_edge(Edge{out.grad_fn(), 0});
    } else if (auto it = index_of.find(out.impl()); it != index_of.end()) {
      used[static_cast<size_t>(it->second)] = true;  // the output is itself a parameter
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      if (auto leaf = acc->leaf()) {
        if (auto it = index_of.find(leaf.get()); it != index_of.end()) used[static_cast<size_t>(it->second)] = true;
      }
      continue;
    }
    for (const Edge& e : n->next_edges()) visit_edge(e);
  }
  return used;
}

}  // namespace

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, std::shared_ptr<comm::ProcessGroup> group,
                 ReducerOptions options)
    : group_(std::move(group)), options_(std::move(options)) {
  TANDEM_CHECK(group_ != nullptr, "DDP: no process group");
  TANDEM_CHECK(!params.empty(), "DDP: the model has no parameters that require grad");
  for (auto& [name, t] : params) {
    TANDEM_CHECK(t.requires_grad() && t.is_leaf(), "DDP: parameter '{}' must be a leaf that requires grad", name);
    Param p;
    p.name = name;
    p.tensor = t;
    params_.push_back(std::move(p));
    if (t.device().is_cuda()) {
      TANDEM_CHECK(!has_device_params_ || comm_stream_.device() == t.device().index,
                   "DDP: parameters on several GPUs ('{}' is on {}); one device per rank is supported", name,
                   t.device().str());
      if (!has_device_params_) comm_stream_ = cuda::Stream::create(t.device().index, /*high_priority=*/true);
      has_device_params_ = true;
    }
  }
  // The first iteration's layout is PyTorch's (DistributedDataParallel's
  // _ddp_init_helper): buckets are formed in registration order and the list
  // is reversed, since gradients become ready roughly in reverse. Where the
  // buckets are rebuilt after the first iteration (no find_unused_parameters,
  // or static_graph), that first layout is one bucket per dtype and device;
  // otherwise it stays, with the small first cap on the parameters defined
  // first, so that their gradients, ready last, do not wait in a large bucket.
  std::vector<int> order(params_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const bool layout_stays = options_.find_unused_parameters && !options_.static_graph;
  const size_t unlimited = std::numeric_limits<size_t>::max();
  std::vector<BucketSpec> first_layout =
      assign_buckets(param_descs(), order, layout_stays ? options_.first_bucket_bytes : unlimited,
                     layout_stays ? options_.bucket_bytes : unlimited);
  std::reverse(first_layout.begin(), first_layout.end());
  build_buckets(std::move(first_layout));
  // The hook goes on the parameter's AccumulateGrad node, as PyTorch's
  // Reducer does (grad_accumulator->add_post_hook), not on the tensor: the
  // node's post-hook fires whenever backward reaches the parameter, also when
  // the gradient that arrives is undefined (an op whose backward returns none
  // for it). The parameter is then ready with zeros in its slot, and not
  // counted as used; a tensor hook would never fire and the iteration would
  // fail as if the parameter had been skipped.
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    p.accumulator = std::dynamic_pointer_cast<AccumulateGrad>(gradient_edge(p.tensor).fn);
    TANDEM_CHECK(p.accumulator != nullptr, "DDP: parameter '{}' has no gradient accumulator", p.name);
    p.hook = p.accumulator->add_post_hook([this, i] { on_gradient_ready(static_cast<int>(i)); });
  }
}

Reducer::~Reducer() {
  for (Param& p : params_) p.accumulator->remove_post_hook(p.hook);
}

Tensor Reducer::bucket_view(int index) const {
  const Param& p = params_[static_cast<size_t>(index)];
  const Bucket& b = buckets_[static_cast<size_t>(p.bucket)];
  return b.buffer.view_range(b.offsets[static_cast<size_t>(p.slot)], p.tensor.shape());
}

std::vector<ParamDesc> Reducer::param_descs() const {
  std::vector<ParamDesc> descs;
  for (const Param& p : params_) descs.push_back(ParamDesc{p.tensor.nbytes(), p.tensor.dtype(), p.tensor.device()});
  return descs;
}

Device Reducer::comm_device() const {
  return has_device_params_ ? Device::cuda(comm_stream_.device()) : Device::cpu();
}

std::vector<Field> Reducer::layout_fields() const {
  std::vector<Field> f{{"buckets", std::to_string(layout_.size())}};
  for (size_t bi = 0; bi < layout_.size(); ++bi) {
    const BucketSpec& b = layout_[bi];
    f.push_back({fmt::format("bucket {}", bi),
                 fmt::format("{}, {} bytes, parameters {}", dtype_name(b.dtype), b.bytes, fmt::join(b.params, " "))});
  }
  return f;
}

void Reducer::build_buckets(std::vector<BucketSpec> layout) {
  NoGradGuard no_grad;
  layout_ = std::move(layout);
  // Gradients living in the old buckets (gradient_as_bucket_view) move to the new ones.
  std::vector<Tensor> old_grads;
  for (const Param& p : params_) old_grads.push_back(p.tensor.grad());
  buckets_.clear();
  for (size_t bi = 0; bi < layout_.size(); ++bi) {
    Bucket b;
    b.spec = layout_[bi];
    int64_t elems = 0;
    for (size_t k = 0; k < b.spec.params.size(); ++k) {
      Param& p = params_[static_cast<size_t>(b.spec.params[k])];
      p.bucket = static_cast<int>(bi);
      p.slot = static_cast<int>(k);
      b.offsets.push_back(elems);
      elems += p.tensor.numel();
    }
    // Memory the process group can reduce in place (the ring on one host maps
    // every rank's buckets: one pass over the bytes, docs/comm.md).
    b.buffer = group_->shared_zeros({elems}, b.spec.dtype, b.spec.device);
    b.hook_view.index = static_cast<int>(bi);
    b.hook_view.buffer = b.buffer;
    b.hook_view.offsets = b.offsets;
    for (int i : b.spec.params) b.hook_view.parameters.push_back(params_[static_cast<size_t>(i)].tensor);
    buckets_.push_back(std::move(b));
  }
  if (options_.gradient_as_bucket_view) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!old_grads[i].defined()) continue;  // stays undefined until it has a gradient (see prepare_forward)
      Tensor view = bucket_view(static_cast<int>(i));
      view.copy_(old_grads[i]);
      params_[i].tensor.set_grad(view);
    }
  }
}

void Reducer::rebuild_buckets() {
  NoGradGuard no_grad;
  // PyTorch's sync_bucket_indices: rank 0 buckets its parameters in the order
  // their gradients became ready there and sends the result, the number of
  // parameters per bucket and their indices; every rank adopts it. Computing
  // the layout on each rank instead would let different options or ready
  // orders build different buckets, whose all-reduces would then not match.
  const Device where = comm_device();
  BucketIndices mine;
  if (group_->rank() == 0) {
    mine = bucket_indices(assign_buckets(param_descs(), ready_order_, options_.first_bucket_bytes,
                                         options_.bucket_bytes));
  }
  auto broadcast = [&](Tensor& t, const char* what) {
    TANDEM_CHECK(group_->broadcast(t, 0)->wait(options_.timeout),
                 "DDP (rank {}): timed out receiving rank 0's rebuilt bucket {}", group_->rank(), what);
  };
  // First the bucket count, which sizes the second broadcast on every rank.
  Tensor count = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.counts.size())}, {1},
                                     DType::I64, where);
  broadcast(count, "count");
  const int64_t buckets = count.to_int_vector()[0];
  std::vector<int64_t> flat(static_cast<size_t>(buckets) + params_.size(), 0);
  if (group_->rank() == 0) {
    std::copy(mine.counts.begin(), mine.counts.end(), flat.begin());
    std::copy(mine.indices.begin(), mine.indices.end(), flat.begin() + buckets);
  }
  Tensor payload = Tensor::from_vector(flat, {static_cast<int64_t>(flat.size())}, DType::I64, where);
  broadcast(payload, "indices");
  flat = payload.to_int_vector();
  BucketIndices adopted{{flat.begin(), flat.begin() + buckets}, {flat.begin() + buckets, flat.end()}};
  // A layout that does not fit this rank's parameters is not thrown here, where
  // the other ranks would go on into the agreement check without this one: it
  // becomes a field of that check, which then fails on every rank naming it.
  std::string adoption = "adopted";
  try {
    build_buckets(buckets_from_indices(param_descs(), adopted));
  } catch (const Error& e) {
    adoption = std::string("does not fit this rank: ") + e.what();
    std::replace(adoption.begin(), adoption.end(), '\n', ' ');
  }
  rebuilt_ = true;
  rebuild_due_ = false;
  std::vector<Field> fields{{"rank 0's rebuilt bucket layout", adoption}};
  fields.insert(fields.end(), options_.setup_fields.begin(), options_.setup_fields.end());
  for (Field& f : layout_fields()) fields.push_back(std::move(f));
  check_ranks_agree(*group_, fields, where, options_.timeout, "the DDP setup after the bucket rebuild",
                    "every rank must construct DistributedDataParallel with the same model and options");
}

void Reducer::prepare_forward() {
  if (phase_ == Phase::Backward && next_to_launch_ > 0) {
    // Backward ran no hook on this rank (every parameter unused here) but buckets were
    // launched for the unused ones: finish the iteration so the ranks stay in step.
    finalize();
  }
  stats_.buckets_rebuilt = false;
  if (rebuild_due_) {
    rebuild_buckets();
    stats_.buckets_rebuilt = true;
  }
  if (options_.gradient_as_bucket_view) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor view = bucket_view(static_cast<int>(i));
      Tensor g = params_[i].tensor.grad();
      // A user-assigned grad is brought back into the bucket; an undefined one
      // (zero_grad(set_to_none), a parameter no rank used) stays undefined, as in
      // PyTorch, until finalize() points it at its bucket view.
      if (!g.defined() || is_view_into(g, view)) continue;
      view.copy_(g);
      params_[i].tensor.set_grad(view);
    }
  }
  forward_start_ = Clock::now();
  phase_ = Phase::Forward;
}

void Reducer::prepare_backward(const std::vector<Tensor>& outputs) {
  backward_start_ = Clock::now();
  capturing_ = has_device_params_ && cuda::is_capturing(cuda::current_stream(comm_stream_.device()));
  if (device_timing()) {
    if (!backward_start_event_) backward_start_event_.emplace(/*enable_timing=*/true);
    backward_start_event_->record(cuda::current_stream(comm_stream_.device()));
  }
  phase_ = Phase::Backward;
  reductions_of_stats_ = false;
  for (Param& p : params_) p.ready = p.reached = p.used = false;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.spec.params.size());
    b.launched = false;
    b.reduction = {};
  }
  next_to_launch_ = 0;
  ready_order_.clear();
  finalize_queued_ = false;
  used_work_.reset();  // left over only if the last iteration failed
  if (!sync_) return;

  if (options_.find_unused_parameters || options_.static_graph) {
    std::vector<bool> unused;
    if (options_.static_graph && unused_known_) {
      unused = static_unused_;
    } else {
      std::unordered_map<TensorImpl*, int> index_of;
      for (size_t i = 0; i < params_.size(); ++i) index_of[params_[i].tensor.impl()] = static_cast<int>(i);
      std::vector<bool> used = reachable_params(outputs, index_of, params_.size());
      unused.resize(used.size());
      for (size_t i = 0; i < used.size(); ++i) unused[i] = !used[i];
      if (options_.static_graph) {
        static_unused_ = unused;
        unused_known_ = true;
      }
    }
    for (size_t i = 0; i < unused.size(); ++i)
      if (unused[i]) mark_ready(static_cast<int>(i));
  }
}

void Reducer::on_gradient_ready(int index) {
  Param& p = params_[static_cast<size_t>(index)];
  // Used means it holds a gradient, as in PyTorch's autograd_hook: the hook also
  // fires when backward reached the parameter with an undefined gradient, and
  // such a parameter's .grad must not be touched unless another rank used it.
  const bool has_grad = p.tensor.grad().defined();
  if (!sync_) {
    // no_sync: the gradient accumulates locally. Remember the use, as PyTorch's
    // hook marks its used map before anything else: a parameter used only in an
    // early micro-step still holds gradient that the synchronising step must average.
    p.used_in_no_sync = p.used_in_no_sync || has_grad;
    return;
  }
  TANDEM_CHECK(phase_ == Phase::Backward,
               "DDP: the gradient of '{}' arrived outside a DDP iteration; run the forward pass through "
               "DistributedDataParallel::forward",
               p.name);
  TANDEM_CHECK(!p.ready,
               "DDP: parameter '{}' became ready twice in one iteration: {}", p.name,
               p.reached ? "backward ran twice through one forward (use no_sync() to accumulate over micro-steps)"
                         : "it was found unused by the graph traversal but still received a gradient");
  p.reached = true;
  p.used = has_grad;
  if (!finalize_queued_) {
    finalize_queued_ = true;
    queue_backward_callback([this] { finalize(); });
  }
  mark_ready(index);
}

void Reducer::mark_ready(int index) {
  NoGradGuard no_grad;
  Param& p = params_[static_cast<size_t>(index)];
  p.ready = true;
  p.ready_at = Clock::now();
  ready_order_.push_back(index);
  Tensor view = bucket_view(index);
  Tensor g = p.tensor.grad();
  // A defined gradient is reduced even when this backward's graph did not reach
  // the parameter (PyTorch does the same): it holds what no_sync micro-steps
  // accumulated. An undefined one contributes zeros and stays undefined here.
  if (!g.defined()) {
    view.zero_();
  } else {
    const bool in_place = is_view_into(g, view);
    fill_bucket_view(view, g, in_place);
    if (options_.gradient_as_bucket_view && !in_place) p.tensor.set_grad(view);
  }
  Bucket& b = buckets_[static_cast<size_t>(p.bucket)];
  if (--b.pending == 0) {
    b.ready_at = Clock::now();
    launch_ready_buckets();
  }
}

// The bucket's copy of one gradient (`in_place`: it already is the bucket's
// view, gradient_as_bucket_view after the first step). A registered hook gets
// the local sum and averages itself, as PyTorch's hooks do (ddp/comm_hook.h),
// so a ported hook does not divide twice. Without one, the division by the
// world size is done here, in the copy, as PyTorch's Reducer does
// (mark_variable_ready_dense): one pass over each gradient as it becomes ready
// instead of a second pass over the whole bucket on the autograd thread when
// it launches (docs/ddp-internals.md has the measured cost).
void Reducer::fill_bucket_view(Tensor& view, const Tensor& grad, bool in_place) const {
  const bool average = !options_.comm_hook;
  if (in_place) {
    if (average) scale_in_place(view, 1.0 / group_->size());
    return;
  }
  if (average && grad.dtype() == view.dtype() && grad.device() == view.device()) {
    scale_into(grad, view, 1.0 / group_->size());
    return;
  }
  view.copy_(grad);  // a hook's undivided sum, or a cast / another device: copy, then divide
  if (average) scale_in_place(view, 1.0 / group_->size());
}

// Without a registered hook the bucket already holds the average's terms (fill_bucket_view).
PendingReduction Reducer::reduce(GradBucket& bucket) {
  if (!options_.comm_hook) return PendingReduction{group_->all_reduce(bucket.buffer, comm::ReduceOp::Sum), {}};
  return options_.comm_hook(options_.comm_hook_state.get(), *group_, bucket);
}

void Reducer::launch_ready_buckets() {
  // Buckets are reduced in index order on every rank: collectives must be issued
  // in the same sequence everywhere, whatever order gradients arrive in.
  while (next_to_launch_ < static_cast<int>(buckets_.size()) &&
         buckets_[static_cast<size_t>(next_to_launch_)].pending == 0) {
    Bucket& b = buckets_[static_cast<size_t>(next_to_launch_)];
    GradBucket gb = b.hook_view;  // a copy: what a hook does to it does not outlive the call
    gb.is_last = next_to_launch_ + 1 == static_cast<int>(buckets_.size());
    if (b.spec.device.is_cuda()) {
      // The comm stream must see the gradients the compute stream wrote.
      cuda::Event written;
      written.record(cuda::current_stream(b.spec.device.index));
      written.block(comm_stream_);
      b.buffer.storage()->record_stream(comm_stream_);
      cuda::StreamGuard guard(comm_stream_);
      if (device_timing()) {
        if (!b.comm_start) b.comm_start.emplace(/*enable_timing=*/true);
        if (!b.comm_end) b.comm_end.emplace(/*enable_timing=*/true);
        b.comm_start->record(comm_stream_);  // reached once the gradients are written and earlier buckets done
      }
      b.reduction = reduce(gb);
      // A hook's `finish` (PowerSGD's second all-reduce, the division) runs
      // later, in finalize(): the interval is the launched collective's.
      if (device_timing()) b.comm_end->record(comm_stream_);
    } else {
      b.reduction = reduce(gb);
    }
    TANDEM_CHECK(b.reduction.work != nullptr, "DDP: the comm hook returned no work for bucket {}", next_to_launch_);
    b.launched = true;
    ++next_to_launch_;
  }
  if (next_to_launch_ == static_cast<int>(buckets_.size())) launch_used_map();
}

void Reducer::launch_used_map() {
  const bool track_unused = options_.find_unused_parameters || options_.static_graph;
  if (!track_unused || used_work_ || !static_global_used_.empty()) return;
  // Issued after the last bucket on every rank: the same collective sequence everywhere.
  std::vector<int64_t> local(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) local[i] = params_[i].used || params_[i].used_in_no_sync ? 1 : 0;
  const Device where = comm_device();
  std::optional<cuda::StreamGuard> on_comm_stream;  // on a GPU, behind the buckets on the comm stream
  if (where.is_cuda()) on_comm_stream.emplace(comm_stream_);
  used_map_ = Tensor::from_vector(local, {static_cast<int64_t>(local.size())}, DType::I32, where);
  used_work_ = group_->all_reduce(used_map_, comm::ReduceOp::Sum);
}

std::vector<int64_t> Reducer::global_used() {
  if (!static_global_used_.empty()) return static_global_used_;
  launch_used_map();  // in case no bucket launched it (it is idempotent)
  TANDEM_CHECK(used_work_->wait(options_.timeout), "DDP (rank {}): timed out reducing the used-parameter map",
               group_->rank());
  std::optional<cuda::StreamGuard> on_comm_stream;
  if (used_map_.device().is_cuda()) on_comm_stream.emplace(comm_stream_);
  const std::vector<int64_t> used = used_map_.to_int_vector();
  on_comm_stream.reset();
  used_work_.reset();
  used_map_ = Tensor();
  if (options_.static_graph) static_global_used_ = used;  // the same graph every iteration
  return used;
}

void Reducer::finalize() {
  NoGradGuard no_grad;
  const Clock::time_point end_of_autograd = Clock::now();
  if (device_timing()) {
    if (!autograd_end_event_) autograd_end_event_.emplace(/*enable_timing=*/true);
    autograd_end_event_->record(cuda::current_stream(comm_stream_.device()));
  }
  phase_ = Phase::Idle;
  if (autograd_end_hook_) autograd_end_hook_();
  if (next_to_launch_ < static_cast<int>(buckets_.size())) {
    std::vector<std::string> missing;
    for (const Param& p : params_)
      if (!p.ready) missing.push_back(p.name);
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) list += fmt::format(" and {} more", missing.size() - 5);
    TANDEM_FAIL(
        "DDP (rank {}): {} parameter(s) received no gradient in this iteration: {}. If parts of the model are "
        "skipped on some steps or ranks, construct DistributedDataParallel with find_unused_parameters=true",
        group_->rank(), missing.size(), list);
  }

  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = buckets_[bi];
    if (b.spec.device.is_cuda()) {
      // A backend that completes on the stream (NCCL) orders its result on the comm
      // stream: no host wait. One that completes on the host (the ring) has the
      // result in the bucket only once its Work completed (comm/process_group.h).
      if (group_->device_completion() == comm::DeviceCompletion::OnHost) {
        TANDEM_CHECK(b.reduction.work->wait(options_.timeout),
                     "DDP (rank {}): timed out after {} ms waiting for the all-reduce of bucket {}", group_->rank(),
                     options_.timeout.count(), bi);
      }
      {
        cuda::StreamGuard guard(comm_stream_);
        if (b.reduction.finish) b.reduction.finish();
      }
      cuda::Event reduced;
      reduced.record(comm_stream_);
      reduced.block(cuda::current_stream(b.spec.device.index));  // no host wait
    } else {
      TANDEM_CHECK(b.reduction.work->wait(options_.timeout),
                   "DDP (rank {}): timed out after {} ms waiting for the all-reduce of bucket {}", group_->rank(),
                   options_.timeout.count(), bi);
      if (b.reduction.finish) b.reduction.finish();
    }
  }

  // Read after the buckets: its all-reduce was issued after theirs.
  const bool track_unused = options_.find_unused_parameters || options_.static_graph;
  const std::vector<int64_t> used_anywhere = track_unused ? global_used() : std::vector<int64_t>{};
  for (size_t i = 0; i < params_.size(); ++i) {
    if (track_unused && used_anywhere[i] == 0) continue;  // unused everywhere: grad left as it was
    Tensor view = bucket_view(static_cast<int>(i));
    Tensor g = params_[i].tensor.grad();
    if (options_.gradient_as_bucket_view) {
      if (!g.defined()) params_[i].tensor.set_grad(view);  // used elsewhere, not here: the average is its grad
    } else if (g.defined()) {
      g.copy_(view);
    } else {
      params_[i].tensor.set_grad(view.clone());
    }
  }

  record_stats(end_of_autograd);
  for (Param& p : params_) p.used_in_no_sync = false;
  ++iteration_;
  if (!rebuilt_ && (!options_.find_unused_parameters || options_.static_graph)) rebuild_due_ = true;
}

void Reducer::record_stats(Clock::time_point end_of_autograd) {
  const Clock::time_point done = Clock::now();
  IterationStats s;
  s.iteration = iteration_;
  s.synchronized = true;
  s.buckets_rebuilt = stats_.buckets_rebuilt;
  s.forward_start = forward_start_;
  s.backward_start = backward_start_;
  s.autograd_end = end_of_autograd;
  s.forward_ms = milliseconds_between(forward_start_, backward_start_);
  s.backward_compute_ms = milliseconds_between(backward_start_, end_of_autograd);
  s.exposed_comm_ms = milliseconds_between(end_of_autograd, done);
  for (const Param& p : params_) s.unused_params += p.used || p.used_in_no_sync ? 0 : 1;
  for (int i : ready_order_) {
    const Param& p = params_[static_cast<size_t>(i)];
    s.ready_order.push_back(p.name);
    s.ready_bytes.push_back(p.tensor.nbytes());
    s.ready_ms.push_back(milliseconds_between(backward_start_, p.ready_at));
  }
  record_comm_stats(s);
  stats_ = std::move(s);
  reductions_of_stats_ = true;
}

bool Reducer::device_timing() const {
  return has_device_params_ && !capturing_ && group_->device_completion() == comm::DeviceCompletion::OnStream;
}

bool Reducer::device_times(IterationStats& s) const {
  if (!backward_start_event_ || !autograd_end_event_ || !autograd_end_event_->query()) return false;
  for (const Bucket& b : buckets_)
    if (!b.comm_start || !b.comm_end || !b.comm_end->query()) return false;
  s.backward_compute_ms = backward_start_event_->elapsed_ms(*autograd_end_event_);
  double last_end = 0;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    s.buckets[bi].comm_start_ms = backward_start_event_->elapsed_ms(*buckets_[bi].comm_start);
    s.buckets[bi].comm_end_ms = backward_start_event_->elapsed_ms(*buckets_[bi].comm_end);
    last_end = std::max(last_end, s.buckets[bi].comm_end_ms);
  }
  s.exposed_comm_ms = std::max(0.0, last_end - s.backward_compute_ms);
  s.device_timed = true;
  return true;
}

void Reducer::record_comm_stats(IterationStats& s) const {
  s.buckets.clear();
  s.comm_complete = true;
  for (const Bucket& b : buckets_) {
    BucketStats bs;
    bs.bytes = b.spec.bytes;
    bs.num_params = static_cast<int>(b.spec.params.size());
    bs.ready_ms = milliseconds_between(backward_start_, b.ready_at);
    const auto& w = b.reduction.work;
    if (!device_timing() && w && w->is_completed()) {
      bs.comm_start_ms = milliseconds_between(backward_start_, w->start_time());
      bs.comm_end_ms = milliseconds_between(backward_start_, w->end_time());
    } else if (!device_timing()) {
      s.comm_complete = false;
    }
    s.buckets.push_back(bs);
  }
  if (device_timing()) s.comm_complete = device_times(s);
  const CommTimes t = comm_times(s);
  s.backward_comm_ms = t.busy_ms;
  s.overlap_ms = t.overlap_ms;
}

const IterationStats& Reducer::complete_stats() {
  if (stats_.comm_complete || !reductions_of_stats_) return stats_;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    const auto& w = buckets_[bi].reduction.work;
    TANDEM_CHECK(!w || w->wait(options_.timeout),
                 "DDP (rank {}): timed out after {} ms waiting for the all-reduce of bucket {} (reading its stats)",
                 group_->rank(), options_.timeout.count(), bi);
    if (device_timing() && buckets_[bi].comm_end) buckets_[bi].comm_end->synchronize();
  }
  if (device_timing() && autograd_end_event_) autograd_end_event_->synchronize();
  record_comm_stats(stats_);
  return stats_;
}

std::vector<std::vector<std::string>> Reducer::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const BucketSpec& b : layout_) {
    out.emplace_back();
    for (int i : b.params) out.back().push_back(params_[static_cast<size_t>(i)].name);
  }
  return out;
}

}  // namespace tandem::ddp
