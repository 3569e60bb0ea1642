// One rank of the DDP multi-process tests (tests/ddp/ddp_test.cc starts N of
// them with the launcher). Trains tests/ddp/ddp_scenario.h's MLP for --steps
// steps under DistributedDataParallel (ring backend on the CPU by default;
// --device cuda puts the model and data on GPU 0, --backend nccl uses NCCL)
// and writes its final parameters (safetensors) and the last iteration's DDP
// stats (JSON) into --out-dir. With --zero, the model is not wrapped in DDP and
// ZeroRedundancyOptimizer (ZeRO-1) does the communication and the update.
//
// Exit 0 on success, 2 on an error (printed on stderr).
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "comm/init.h"
#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/safetensors.h"
#include "core/stream.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/powersgd_hook.h"
#include "ddp/zero_redundancy_optimizer.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "kernels/elementwise.h"
#include "tests/ddp/ddp_scenario.h"

using namespace tandem;

namespace tandem::testing {
// The state of the "ported" hook: how often it ran, how often on the last
// bucket, and whatever in a bucket's metadata does not add up.
struct HookRecord {
  int64_t calls = 0, last_calls = 0;
  std::vector<std::string> errors;
  void record(const ddp::GradBucket& b) {
    ++calls;
    last_calls += b.is_last ? 1 : 0;
    int64_t next = 0;
    const std::vector<Tensor> grads = b.gradients();
    for (size_t k = 0; k < b.parameters.size(); ++k) {
      if (b.offsets[k] != next) errors.push_back(fmt::format("bucket {}: parameter {} at offset {}", b.index, k, b.offsets[k]));
      if (grads[k].shape() != b.parameters[k].shape()) errors.push_back(fmt::format("bucket {}: gradient {} shape", b.index, k));
      next += b.parameters[k].numel();
    }
    if (next != b.buffer.numel()) errors.push_back(fmt::format("bucket {}: {} of {} elements", b.index, next, b.buffer.numel()));
  }
};

// One ZeRO-1 rank: the scenario's MLP (branch always used), AdamW over shards,
// the same data slices as the DDP runs; writes params_rank<R>.safetensors and
// stats_rank<R>.json (the shard range and the optimizer state bytes).
int run_zero_rank(ScenarioMlp& mlp, const std::shared_ptr<comm::ProcessGroup>& group, int64_t steps, int64_t batch,
                  double lr, double clip, const std::string& out_dir) {
  const int rank = group->rank(), world = group->size();
  ddp::ZeroRedundancyOptimizer zero(scenario_param_groups(mlp), group, [&](const auto& shard_groups) {
    std::vector<optim::AdamW::ParamGroup> groups;
    for (const auto& g : shard_groups) groups.push_back({g.pieces, scenario_adamw_options(lr, g.group == 0)});
    return std::make_unique<optim::AdamW>(groups);
  });
  const Device device = mlp.parameters().front().device();
  for (int64_t s = 0; s < steps; ++s) {
    Tensor x = scenario_inputs(s, rank * batch, batch).to(device);
    Tensor t = scenario_targets(s, rank * batch, batch).to(device);
    mse(mlp.forward(x, true), t).backward();
    zero.reduce_scatter_gradients();
    if (clip > 0) zero.clip_grad_norm_(clip);
    zero.step_and_gather();
    zero.zero_grad();
  }
  if (!out_dir.empty()) {
    mlp.to(Device::cpu());
    save_safetensors(fmt::format("{}/params_rank{}.safetensors", out_dir, rank), mlp.state_dict());
    nlohmann::json j;
    j["shard_begin"] = zero.shard_range().first;
    j["shard_end"] = zero.shard_range().second;
    j["elements"] = zero.num_elements();
    j["state_bytes"] = zero.state_bytes();
    j["world"] = world;
    std::ofstream(fmt::format("{}/stats_rank{}.json", out_dir, rank)) << j.dump(2);
  }
  return 0;
}

}  // namespace tandem::testing


int main(int argc, char** argv) {
  CLI::App app{"DDP test rank"};
  int64_t steps = 3, batch = 4, micro = 1;
  double cap_mb = 25, first_cap_mb = 1, lr = 0.05, rank1_cap_mb = -1;
  bool grad_view = false, find_unused = false, static_graph = false, mismatch = false, eval_on_rank0 = false,
       zero = false;
  double clip = 0;
  std::string optimizer_name = "sgd";
  ddp::PowerSGDOptions powersgd_options;
  powersgd_options.start_powerSGD_iter = 2;
  int slow_backward_ms = 0;
  std::string branch = "always", hook = "allreduce", rank1_hook, out_dir, device_name = "cpu", backend = "ring";
  app.add_option("--steps", steps);
  app.add_option("--batch", batch);
  app.add_option("--micro", micro, "micro-steps per optimizer step (no_sync on all but the last)");
  app.add_option("--bucket-cap-mb", cap_mb);
  app.add_option("--rank1-bucket-cap-mb", rank1_cap_mb, "rank 1 uses this bucket_cap_mb (a mismatch on purpose)");
  app.add_option("--rank1-hook", rank1_hook, "rank 1 uses this comm hook (a mismatch on purpose)");
  app.add_option("--first-bucket-mb", first_cap_mb);
  app.add_option("--lr", lr);
  app.add_flag("--grad-view", grad_view);
  app.add_flag("--find-unused", find_unused);
  app.add_flag("--static-graph", static_graph);
  app.add_flag("--mismatch", mismatch, "rank 1 builds a different model");
  app.add_flag("--eval-on-rank0", eval_on_rank0, "after training, rank 0 alone runs a no-grad forward through DDP");
  app.add_option("--slow-backward-ms", slow_backward_ms);
  app.add_option("--optimizer", optimizer_name, "sgd (plain p -= lr * grad) or adamw (weight decay on matrices only)")
      ->check(CLI::IsMember({"sgd", "adamw"}));
  app.add_flag("--zero", zero, "ZeRO-1: ZeroRedundancyOptimizer instead of DDP (with --optimizer adamw)");
  app.add_option("--clip", clip, "> 0: clip the gradient norm to this (adamw)");
  app.add_option("--branch", branch);
  app.add_option("--hook", hook);
  app.add_option("--powersgd-rank", powersgd_options.matrix_approximation_rank);
  app.add_option("--powersgd-start", powersgd_options.start_powerSGD_iter);
  app.add_option("--powersgd-min-rate", powersgd_options.min_compression_rate);
  app.add_flag("!--powersgd-no-error-feedback", powersgd_options.use_error_feedback);
  app.add_flag("!--powersgd-no-warm-start", powersgd_options.warm_start);
  app.add_option("--out-dir", out_dir, "writes params_rank<R>.safetensors and stats_rank<R>.json there");
  app.add_option("--device", device_name, "cpu, or cuda: every rank on GPU 0 (ring) or on its local rank's GPU (nccl)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--backend", backend, "ring or nccl")->check(CLI::IsMember({"ring", "nccl"}));
  CLI11_PARSE(app, argc, argv);

  try {
    comm::RankInfo info = comm::rank_info_from_env();
    comm::ProcessGroupOptions pg_options;
    pg_options.timeout = std::chrono::seconds(30);
    // Several ranks share one GPU only through the ring (NCCL refuses two ranks on one device).
    const Device device = device_name == "cpu" ? Device::cpu() : Device::cuda(backend == "nccl" ? info.local_rank : 0);
    if (device.is_cuda()) cuda::set_device(device.index);
    auto group = comm::init_process_group(backend, info, pg_options);
    const int rank = group->rank(), world = group->size();

    std::shared_ptr<nn::Module> model;
    auto mlp = std::make_shared<testing::ScenarioMlp>(/*seed=*/rank + 1);  // rank 0's weights must win
    model = mlp;
    if (mismatch && rank == 1) {
      class Different : public nn::Module {
       public:
        Different() {
          nn::Init init(1);
          register_module("fc1", std::make_shared<nn::Linear>(testing::kScenarioIn, 25, true, init));
        }
      };
      model = std::make_shared<Different>();
    }

    model->to(device);

    auto hook_record = std::make_shared<testing::HookRecord>();
    std::shared_ptr<ddp::PowerSGDState> powersgd;
    if (hook == "powersgd" || rank1_hook == "powersgd") powersgd = std::make_shared<ddp::PowerSGDState>(powersgd_options);
    ddp::DDPOptions o;
    o.bucket_cap_mb = rank == 1 && rank1_cap_mb >= 0 ? rank1_cap_mb : cap_mb;
    if (rank == 1 && !rank1_hook.empty()) hook = rank1_hook;
    o.first_bucket_cap_mb = first_cap_mb;
    o.gradient_as_bucket_view = grad_view;
    o.find_unused_parameters = find_unused;
    o.static_graph = static_graph;
    o.timeout = std::chrono::seconds(30);
    if (hook == "fp16") o.comm_hook = ddp::fp16_compress_hook(), o.comm_hook_name = "fp16";
    else if (hook == "bf16") o.comm_hook = ddp::bf16_compress_hook(), o.comm_hook_name = "bf16";
    else if (hook == "powersgd") {
      o.comm_hook = ddp::powerSGD_hook(), o.comm_hook_name = "powersgd";
      o.comm_hook_state = powersgd;
    }
    else if (hook == "user") {
      // A user-supplied hook: sums a copy of the bucket and copies it back,
      // averaged, in `finish`, exercising both halves of the hook contract.
      o.comm_hook = [](void*, comm::ProcessGroup& g, ddp::GradBucket& b) {
        Tensor copy = b.buffer.clone();
        Tensor target = b.buffer;
        const double world = g.size();
        return ddp::PendingReduction{g.all_reduce(copy, comm::ReduceOp::Sum), [copy, target, world]() mutable {
                                       target.copy_(copy);
                                       ddp::scale_in_place(target, 1.0 / world);
                                     }};
      };
    } else if (hook == "ported") {
      // PyTorch's default_hooks.allreduce_hook, line for line:
      //   tensor = bucket.buffer(); tensor.div_(group_to_use.size())
      //   return dist.all_reduce(tensor, async_op=True).get_future()...
      // plus a state that counts calls and checks the bucket's metadata.
      o.comm_hook = [](void* state, comm::ProcessGroup& g, ddp::GradBucket& b) {
        auto& st = *static_cast<testing::HookRecord*>(state);
        st.record(b);
        Tensor tensor = b.buffer;
        ddp::scale_in_place(tensor, 1.0 / g.size());
        return ddp::PendingReduction{g.all_reduce(tensor, comm::ReduceOp::Sum), {}};
      };
      o.comm_hook_state = hook_record;
      o.comm_hook_name = "ported";
    } else if (hook != "allreduce") TANDEM_FAIL("unknown --hook {}", hook);
    if (zero) return testing::run_zero_rank(*mlp, group, steps, batch, lr, clip, out_dir);
    ddp::DistributedDataParallel ddp(model, group, o);
    std::unique_ptr<optim::AdamW> adamw;
    if (optimizer_name == "adamw") adamw = testing::scenario_adamw(*mlp, lr);

    std::vector<std::string> without_grad;  // after the last step's backward
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t m = 0; m < micro; ++m) {
        const bool use_branch = testing::scenario_branch_used(branch, s, rank, m);
        const bool cut = testing::scenario_branch_gradient_cut(branch, rank);
        const int64_t first = (m * world + rank) * batch;
        Tensor x = testing::scenario_inputs(s, first, batch).to(device);
        Tensor t = testing::scenario_targets(s, first, batch).to(device);
        auto step = [&] {
          Tensor y = ddp.forward([&] { return mlp->forward(x, use_branch, slow_backward_ms, cut); });
          kernels::scale(testing::mse(y, t), 1.0 / static_cast<double>(micro)).backward();
        };
        if (m + 1 < micro) {
          auto guard = ddp.no_sync();
          step();
        } else {
          step();
        }
      }
      if (s + 1 == steps) {
        for (const auto& [name, p] : model->named_parameters())
          if (!p.grad().defined()) without_grad.push_back(name);
      }
      if (adamw) {
        if (clip > 0) optim::clip_grad_norm_(adamw->params(), clip);
        adamw->step();
        adamw->zero_grad();
      } else {
        testing::sgd_step(*model, lr);
      }
    }

    if (eval_on_rank0 && rank == 0) {
      NoGradGuard no_grad;
      (void)ddp.forward([&] { return mlp->forward(testing::scenario_inputs(0, 0, batch).to(device), false); });
    }

    if (!out_dir.empty()) {
      model->to(Device::cpu());
      save_safetensors(fmt::format("{}/params_rank{}.safetensors", out_dir, rank), model->state_dict());
      const auto& st = ddp.complete_stats();  // NCCL may finish after backward returned
      nlohmann::json j;
      j["device_timed"] = st.device_timed;
      j["comm_complete"] = st.comm_complete;
      j["exposed_comm_ms"] = st.exposed_comm_ms;
      j["forward_ms"] = st.forward_ms;
      j["backward_compute_ms"] = st.backward_compute_ms;
      j["backward_comm_ms"] = st.backward_comm_ms;
      j["overlap_ms"] = st.overlap_ms;
      j["unused_params"] = st.unused_params;
      j["buckets_rebuilt"] = st.buckets_rebuilt;
      j["ready_order"] = st.ready_order;
      j["without_grad"] = without_grad;
      for (const auto& b : st.buckets)
        j["buckets"].push_back({{"bytes", b.bytes}, {"params", b.num_params}, {"ready_ms", b.ready_ms},
                                {"comm_start_ms", b.comm_start_ms}, {"comm_end_ms", b.comm_end_ms}});
      for (const auto& b : ddp.buckets()) j["layout"].push_back(b.params);
      j["logging_data"] = nlohmann::json::parse(ddp::to_json(ddp.logging_data()));
      if (powersgd) {
        j["powersgd_numel_before"] = powersgd->numel_before_compression();
        j["powersgd_numel_after"] = powersgd->numel_after_compression();
        j["powersgd_iterations"] = powersgd->iteration();
      }
      j["hook_calls"] = hook_record->calls;
      j["hook_last_calls"] = hook_record->last_calls;
      j["hook_metadata_errors"] = hook_record->errors;
      std::ofstream(fmt::format("{}/stats_rank{}.json", out_dir, rank)) << j.dump(2);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_worker: %s\n", e.what());
    return 2;
  }
}
