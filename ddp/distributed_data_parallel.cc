#include "ddp/distributed_data_parallel.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/autograd/grad_mode.h"
#include "core/check.h"

namespace tandem::ddp {

namespace {

Device comm_device(const nn::Module& m) {
  for (auto& [n, t] : m.named_parameters())
    if (t.device().is_cuda()) return t.device();
  return Device::cpu();
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<comm::ProcessGroup> group, DDPOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(std::move(options)) {
  TANDEM_CHECK(module_ && group_, "DistributedDataParallel needs a module and a process group");
  TANDEM_CHECK(options_.bucket_cap_mb >= 0 && options_.first_bucket_cap_mb >= 0,
               "DDP: bucket caps must be >= 0 (bucket_cap_mb={}, first_bucket_cap_mb={})", options_.bucket_cap_mb,
               options_.first_bucket_cap_mb);
  verify_same_parameters_on_all_ranks();
  broadcast_from_rank0();

  ReducerOptions r;
  r.bucket_bytes = bucket_cap_bytes(options_.bucket_cap_mb);
  r.first_bucket_bytes = std::min(bucket_cap_bytes(options_.first_bucket_cap_mb), r.bucket_bytes);
  r.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  r.find_unused_parameters = options_.find_unused_parameters;
  r.static_graph = options_.static_graph;
  r.timeout = options_.timeout;
  r.comm_hook = options_.comm_hook;
  r.comm_hook_state = options_.comm_hook_state;
  r.setup_fields = option_fields();
  std::vector<std::pair<std::string, Tensor>> params;
  for (auto& [name, t] : module_->named_parameters())
    if (t.requires_grad()) params.emplace_back(name, t);
  reducer_ = std::make_unique<Reducer>(std::move(params), group_, std::move(r));
  for (const BucketSpec& b : reducer_->buckets()) initial_bucket_sizes_.push_back(static_cast<int64_t>(b.bytes));
  // Ranks with different options would build different buckets or issue
  // different collectives in backward: compare them (and the layout they give)
  // now, before the first backward depends on them.
  std::vector<Field> setup = option_fields();
  for (Field& f : reducer_->layout_fields()) setup.push_back(std::move(f));
  check_ranks_agree(*group_, setup, comm_device(*module_), options_.timeout, "the DDP setup",
                    "every rank must construct DistributedDataParallel with the same options");
}

LoggingData DistributedDataParallel::logging_data() const {
  LoggingData d;
  d.backend = group_->backend_name();
  d.transport = group_->transport();
  d.shared_buffers = group_->shared_buffers();
  d.single_copy = group_->single_copy();
  d.world_size = group_->size();
  d.rank = group_->rank();
  std::set<std::string> dtypes;
  for (const auto& [name, t] : module_->named_parameters()) {
    if (!t.requires_grad()) continue;
    d.device = t.device().str();
    ++d.num_parameter_tensors;
    d.parameter_bytes += t.nbytes();
    dtypes.insert(std::string(dtype_name(t.dtype())));
  }
  d.dtypes.assign(dtypes.begin(), dtypes.end());
  d.bucket_cap_mb = options_.bucket_cap_mb;
  d.first_bucket_cap_mb = options_.first_bucket_cap_mb;
  d.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  d.find_unused_parameters = options_.find_unused_parameters;
  d.static_graph = options_.static_graph;
  d.comm_hook = comm_hook_name();
  d.timeout_ms = options_.timeout.count();
  d.bucket_sizes = initial_bucket_sizes_;
  d.has_rebuilt_buckets = reducer_->buckets_rebuilt();
  if (d.has_rebuilt_buckets)
    for (const BucketSpec& b : reducer_->buckets()) d.rebuilt_bucket_sizes.push_back(static_cast<int64_t>(b.bytes));
  d.iterations = reducer_->iterations();
  d.environment = distributed_environment();
  return d;
}

void DistributedDataParallel::verify_same_parameters_on_all_ranks() {
  // requires_grad is part of it: the Reducer buckets only parameters that
  // require grad, so a parameter frozen on one rank alone shifts every bucket.
  std::vector<Field> fields;
  for (auto& [name, t] : module_->named_parameters())
    fields.push_back({fmt::format("parameter {}", fields.size()),
                      fmt::format("{} {}{}{}", name, dtype_name(t.dtype()), shape_str(t.shape()),
                                  t.requires_grad() ? "" : " (frozen)")});
  check_ranks_agree(*group_, fields, comm_device(*module_), options_.timeout, "the model",
                    "every rank must build the same model");
}

std::vector<Field> DistributedDataParallel::option_fields() const {
  // Everything that shapes the collectives DDP issues: the bucket caps (the
  // layout), find_unused_parameters and static_graph (the used-map all-reduce),
  // gradient_as_bucket_view (which gradients reach a bucket), the comm hook
  // (what is sent: a compressed bucket has another dtype and size). The
  // timeout is left out: differing timeouts change no collective.
  return {{"bucket_cap_mb", fmt::format("{}", options_.bucket_cap_mb)},
          {"first_bucket_cap_mb", fmt::format("{}", options_.first_bucket_cap_mb)},
          {"gradient_as_bucket_view", options_.gradient_as_bucket_view ? "true" : "false"},
          {"find_unused_parameters", options_.find_unused_parameters ? "true" : "false"},
          {"static_graph", options_.static_graph ? "true" : "false"},
          {"comm_hook", comm_hook_name()}};
}

std::string DistributedDataParallel::comm_hook_name() const {
  return !options_.comm_hook ? "allreduce" : (options_.comm_hook_name.empty() ? "user" : options_.comm_hook_name);
}

void DistributedDataParallel::broadcast_from_rank0() {
  NoGradGuard no_grad;
  // One flat buffer per dtype: few collectives whatever the number of tensors.
  std::map<DType, std::vector<Tensor>> groups;
  for (auto& [n, t] : module_->named_parameters()) groups[t.dtype()].push_back(t);
  for (auto& [n, t] : module_->named_buffers()) groups[t.dtype()].push_back(t);
  const Device where = comm_device(*module_);
  for (auto& [dtype, tensors] : groups) {
    int64_t total = 0;
    for (const Tensor& t : tensors) total += t.numel();
    Tensor flat = Tensor::empty({total}, dtype, where);
    int64_t off = 0;
    for (const Tensor& t : tensors) {
      flat.view_range(off, {t.numel()}).copy_(t.detach());
      off += t.numel();
    }
    TANDEM_CHECK(group_->broadcast(flat, 0)->wait(options_.timeout),
                 "DDP (rank {}): timed out receiving rank 0's parameters", group_->rank());
    off = 0;
    for (const Tensor& t : tensors) {
      Tensor dst = t.detach();
      dst.copy_(flat.view_range(off, {t.numel()}));
      off += t.numel();
    }
  }
}

Tensor DistributedDataParallel::forward(const std::function<Tensor()>& forward) {
  // A forward without gradients (evaluation, often on rank 0 alone) must not take
  // part in DDP's collectives such as the bucket rebuild's broadcast: the other
  // ranks are not there. PyTorch skips its pre-forward work the same way.
  if (!GradMode::enabled()) return forward();
  reducer_->prepare_forward();
  Tensor out = forward();
  if (out.defined() && out.requires_grad()) reducer_->prepare_backward({out});
  return out;
}

}  // namespace tandem::ddp
