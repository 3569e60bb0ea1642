#include "comm/debug_process_group.h"

#include <algorithm>

#include "core/check.h"

namespace tandem::comm {

namespace {
constexpr std::chrono::milliseconds kWaitSlice{50};
}  // namespace

std::string collective_fingerprint(std::string_view op, const Tensor& t, const ReduceOp* reduce, int root) {
  std::string s = std::string(op) + "(";
  if (reduce) s += std::string(reduce_op_name(*reduce)) + ", ";
  s += fmt::format("{}, {} elements", dtype_name(t.dtype()), t.numel());
  if (root >= 0) s += fmt::format(", root {}", root);
  return s + ")";
}

DebugProcessGroup::DebugProcessGroup(std::shared_ptr<ProcessGroup> inner, std::shared_ptr<Store> store,
                                     ProcessGroupOptions options)
    : ProcessGroup(inner ? inner->rank() : 0, inner ? inner->size() : 1),
      inner_(std::move(inner)),
      store_(std::move(store)),
      options_(std::move(options)),
      prefix_("debug/" + options_.group_name + "/") {
  TANDEM_CHECK(inner_ != nullptr && store_ != nullptr, "debug process group: needs a process group and a store");
}

void DebugProcessGroup::check_same_on_all_ranks(const std::string& fingerprint) {
  const uint64_t seq = seq_++;
  if (size() == 1) return;
  const std::string base = prefix_ + std::to_string(seq) + "/";
  store_->set(base + std::to_string(rank()), fingerprint);
  std::vector<std::string> keys;
  for (int r = 0; r < size(); ++r) keys.push_back(base + std::to_string(r));
  // Wait in short slices: an earlier op that fails meanwhile is reported at
  // once (its peers will not come), and the backend's own use of the shared
  // store connection is never held up for long.
  const auto deadline = deadline_after(options_.timeout);
  std::vector<std::string> missing = keys;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    missing = store_->wait(missing, std::clamp(left, std::chrono::milliseconds(0), kWaitSlice));
    if (missing.empty()) break;
    for (const auto& w : issued_) {
      TANDEM_CHECK(!w->is_failed(), "collective #{} of group '{}' on rank {}, {}: an earlier {} failed: {}", seq,
                   options_.group_name, rank(), fingerprint, w->op_name(), w->error());
    }
    if (Clock::now() < deadline) continue;
    std::string ranks;
    for (const auto& k : missing) ranks += (ranks.empty() ? "" : ", ") + k.substr(base.size());
    TANDEM_FAIL("collective #{} of group '{}' on rank {}, {}: rank(s) {} did not issue a collective #{} within {} ms "
                "(checked by TANDEM_DISTRIBUTED_DEBUG=DETAIL; every rank must issue the same collectives in the same "
                "order)",
                seq, options_.group_name, rank(), fingerprint, ranks, seq, options_.timeout.count());
  }
  std::vector<std::string> all;
  for (const auto& k : keys) all.push_back(store_->get(k));
  for (int r = 1; r < size(); ++r) {
    TANDEM_CHECK(all[static_cast<size_t>(r)] == all[0],
                 "collective #{} of group '{}' differs between ranks: rank 0 issued {} but rank {} issued {} (found "
                 "by TANDEM_DISTRIBUTED_DEBUG=DETAIL on rank {}; every rank must issue the same collectives in the "
                 "same order, with the same dtypes and sizes)",
                 seq, options_.group_name, all[0], r, all[static_cast<size_t>(r)], rank());
  }
  // Every rank has published op `seq`, so every rank has finished comparing op
  // seq - 1: this rank's key for it is read by nobody any more.
  if (seq > 0) store_->remove(prefix_ + std::to_string(seq - 1) + "/" + std::to_string(rank()));
}

std::shared_ptr<Work> DebugProcessGroup::track(std::shared_ptr<Work> work) {
  std::erase_if(issued_, [](const std::shared_ptr<Work>& w) { return w->is_completed(); });
  issued_.push_back(work);
  return work;
}

std::shared_ptr<Work> DebugProcessGroup::all_reduce(Tensor& t, ReduceOp op) {
  check_all_reduce(t, t);
  std::lock_guard<std::mutex> lock(mutex_);
  check_same_on_all_ranks(collective_fingerprint("all_reduce", t, &op));
  return track(inner_->all_reduce(t, op));
}

std::shared_ptr<Work> DebugProcessGroup::all_reduce(const Tensor& in, Tensor& out, ReduceOp op) {
  check_all_reduce(in, out);
  std::lock_guard<std::mutex> lock(mutex_);
  check_same_on_all_ranks(collective_fingerprint("all_reduce", in, &op));
  return track(inner_->all_reduce(in, out, op));
}

std::shared_ptr<Work> DebugProcessGroup::broadcast(Tensor& t, int root) {
  check_broadcast(t, root);
  std::lock_guard<std::mutex> lock(mutex_);
  check_same_on_all_ranks(collective_fingerprint("broadcast", t, nullptr, root));
  return track(inner_->broadcast(t, root));
}

std::shared_ptr<Work> DebugProcessGroup::all_gather(const Tensor& in, Tensor& out) {
  check_all_gather(in, out);
  std::lock_guard<std::mutex> lock(mutex_);
  check_same_on_all_ranks(collective_fingerprint("all_gather", in, nullptr));
  return track(inner_->all_gather(in, out));
}

std::shared_ptr<Work> DebugProcessGroup::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  check_reduce_scatter(in, out);
  std::lock_guard<std::mutex> lock(mutex_);
  check_same_on_all_ranks(collective_fingerprint("reduce_scatter", in, &op));
  return track(inner_->reduce_scatter(in, out, op));
}

std::shared_ptr<Work> DebugProcessGroup::barrier() {
  std::lock_guard<std::mutex> lock(mutex_);
  check_same_on_all_ranks("barrier()");
  return track(inner_->barrier());
}

}  // namespace tandem::comm
