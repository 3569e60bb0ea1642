#include "tests/ddp/ddp_scenario.h"

#include "core/check.h"

#include <chrono>
#include <thread>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/random.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace tandem::testing {

namespace {

class SleepBackward final : public Node {
 public:
  explicit SleepBackward(int ms) : ms_(ms) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& g) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return {g[0]};
  }
  std::string name() const override { return "SleepBackward"; }

 private:
  int ms_;
};

Tensor delay_backward(const Tensor& x, int ms) {
  Tensor out = x.detach();
  if (any_requires_grad({&x})) std::make_shared<SleepBackward>(ms)->connect({&x}, {&out});
  return out;
}

// The identity in the forward pass; no gradient for its input in backward.
class CutGradient final : public Node {
 public:
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
  std::string name() const override { return "CutGradient"; }
};

Tensor cut_gradient(const Tensor& x) {
  Tensor out = x.detach();
  if (any_requires_grad({&x})) std::make_shared<CutGradient>()->connect({&x}, {&out});
  return out;
}

}  // namespace

ScenarioMlp::ScenarioMlp(uint64_t seed) {
  nn::Init init(seed);
  fc1_ = register_module("fc1", std::make_shared<nn::Linear>(kScenarioIn, 24, true, init));
  branch_ = register_module("branch", std::make_shared<nn::Linear>(24, 24, true, init));
  fc2_ = register_module("fc2", std::make_shared<nn::Linear>(24, 16, true, init));
  fc3_ = register_module("fc3", std::make_shared<nn::Linear>(16, kScenarioOut, true, init));
}

Tensor ScenarioMlp::forward(const Tensor& x, bool use_branch, int slow_backward_ms, bool cut_branch_gradient) const {
  nn::ForwardContext ctx;
  Tensor h = kernels::relu(fc1_->forward(x, ctx));
  if (slow_backward_ms > 0) h = delay_backward(h, slow_backward_ms);
  if (use_branch) {
    Tensor b = kernels::relu(branch_->forward(h, ctx));
    h = kernels::add(h, cut_branch_gradient ? cut_gradient(b) : b);
  }
  return fc3_->forward(kernels::relu(fc2_->forward(h, ctx)), ctx);
}

namespace {
Tensor rows(int64_t step, uint64_t stream, int64_t first, int64_t count, int64_t width) {
  // Element i of the global batch depends only on (step, stream, i): any slice is consistent.
  Tensor all = Tensor::empty({first + count, width});
  fill_normal(all, 1000 + static_cast<uint64_t>(step), stream);
  return all.narrow(first, count).clone();
}
}  // namespace

Tensor scenario_inputs(int64_t step, int64_t first, int64_t count) { return rows(step, 0, first, count, kScenarioIn); }
Tensor scenario_targets(int64_t step, int64_t first, int64_t count) {
  return rows(step, 1, first, count, kScenarioOut);
}

Tensor mse(const Tensor& y, const Tensor& t) {
  Tensor d = kernels::add(y, kernels::scale(t, -1.0));
  return kernels::mean(kernels::mul(d, d));
}

bool scenario_branch_used(const std::string& mode, int64_t step, int rank, int64_t micro) {
  if (mode == "never") return false;
  if (mode == "always") return true;
  if (mode == "alternate") return (step + rank) % 2 == 0;
  if (mode == "rank0") return rank == 0;
  if (mode == "early") return micro == 0;
  if (mode == "cut_rank0" || mode == "cut_all") return true;
  TANDEM_FAIL("unknown branch mode '{}'", mode);
}

bool scenario_branch_gradient_cut(const std::string& mode, int rank) {
  return mode == "cut_all" || (mode == "cut_rank0" && rank == 0);
}

void sgd_step(nn::Module& m, double lr) {
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor updated = kernels::add(p.detach(), kernels::scale(g, -lr));
    Tensor dst = p.detach();
    dst.copy_(updated);
    g.zero_();
  }
}

std::vector<std::vector<Tensor>> scenario_param_groups(const nn::Module& m) {
  std::vector<std::vector<Tensor>> groups(2);
  for (const auto& [name, p] : m.named_parameters()) groups[p.dim() >= 2 ? 0 : 1].push_back(p);
  return groups;
}

optim::AdamWOptions scenario_adamw_options(double lr, bool decayed) {
  optim::AdamWOptions o;
  o.lr = lr;
  o.weight_decay = decayed ? 0.1 : 0.0;
  return o;
}

std::unique_ptr<optim::AdamW> scenario_adamw(const nn::Module& m, double lr) {
  const auto groups = scenario_param_groups(m);
  return std::make_unique<optim::AdamW>(std::vector<optim::AdamW::ParamGroup>{
      {groups[0], scenario_adamw_options(lr, true)}, {groups[1], scenario_adamw_options(lr, false)}});
}

}  // namespace tandem::testing
