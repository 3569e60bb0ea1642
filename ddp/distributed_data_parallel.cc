#include "ddp/distributed_data_parallel.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/autograd/grad_mode.h"
#include "core/check.h"

namespace tandem::ddp {

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

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
  auto to_bytes = [](double mb) {
    double b = mb * 1024.0 * 1024.0;
    return b >= 1e18 ? static_cast<size_t>(1e18) : static_cast<size_t>(b);
  };
  r.bucket_bytes = to_bytes(options_.bucket_cap_mb);
  r.first_bucket_bytes = std::min(to_bytes(options_.first_bucket_cap_mb), r.bucket_bytes);
  r.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  r.find_unused_parameters = options_.find_unused_parameters;
  r.static_graph = options_.static_graph;
  r.timeout = options_.timeout;
  r.comm_hook = options_.comm_hook;
  std::vector<std::pair<std::string, Tensor>> params;
  for (auto& [name, t] : module_->named_parameters())
    if (t.requires_grad()) params.emplace_back(name, t);
  reducer_ = std::make_unique<Reducer>(std::move(params), group_, std::move(r));
  for (const BucketSpec& b : reducer_->buckets()) initial_bucket_sizes_.push_back(static_cast<int64_t>(b.bytes));
}

LoggingData DistributedDataParallel::logging_data() const {
  LoggingData d;
  d.backend = group_->backend_name();
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
  d.comm_hook = !options_.comm_hook ? "allreduce" : (options_.comm_hook_name.empty() ? "user" : options_.comm_hook_name);
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
  std::string mine;
  for (auto& [name, t] : module_->named_parameters())
    mine += fmt::format("{} {}{}\n", name, dtype_name(t.dtype()), shape_str(t.shape()));
  const int world = group_->size();
  const Device where = comm_device(*module_);

  // Exchange lengths, then the padded descriptions.
  Tensor len = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}, {1}, DType::I64, where);
  Tensor lens = Tensor::zeros({world}, DType::I64, where);
  TANDEM_CHECK(group_->all_gather(len, lens)->wait(options_.timeout),
               "DDP (rank {}): timed out exchanging parameter lists with the other ranks", group_->rank());
  std::vector<int64_t> all_lens = lens.to_int_vector();
  int64_t max_len = *std::max_element(all_lens.begin(), all_lens.end());
  // One character per i32 element: every backend gathers i32 (byte tensors are not a collective dtype).
  std::vector<int64_t> chars(static_cast<size_t>(max_len), 0);
  for (size_t i = 0; i < mine.size(); ++i) chars[i] = static_cast<unsigned char>(mine[i]);
  Tensor text = Tensor::from_vector(chars, {max_len}, DType::I32, where);
  Tensor texts = Tensor::zeros({world * max_len}, DType::I32, where);
  TANDEM_CHECK(group_->all_gather(text, texts)->wait(options_.timeout),
               "DDP (rank {}): timed out exchanging parameter lists with the other ranks", group_->rank());
  std::vector<int64_t> gathered = texts.to_int_vector();
  std::string all(gathered.size(), '\0');
  for (size_t i = 0; i < gathered.size(); ++i) all[i] = static_cast<char>(gathered[i]);
  const char* base = all.data();

  auto lines_of = [&](int r) {
    return split_lines(std::string(base + r * max_len, static_cast<size_t>(all_lens[static_cast<size_t>(r)])));
  };
  std::vector<std::string> ref = lines_of(0);
  for (int r = 1; r < world; ++r) {
    std::vector<std::string> other = lines_of(r);
    for (size_t i = 0; i < std::max(ref.size(), other.size()); ++i) {
      std::string a = i < ref.size() ? ref[i] : "(none)", b = i < other.size() ? other[i] : "(none)";
      TANDEM_CHECK(a == b,
                   "DDP: the model differs between ranks: parameter {} is '{}' on rank 0 but '{}' on rank {} "
                   "(every rank must build the same model)",
                   i, a, b, r);
    }
  }
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
