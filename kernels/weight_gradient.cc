// TANDEM_WEIGHT_GRADIENT (see weight_gradient.h).
#include "kernels/weight_gradient.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<WeightGradient, 2> g_weight_gradient{
    "TANDEM_WEIGHT_GRADIENT", {{"cast", WeightGradient::Cast}, {"master", WeightGradient::Master}}};

}  // namespace

WeightGradient weight_gradient() { return g_weight_gradient.value(); }
WeightGradient parse_weight_gradient(const char* v) { return g_weight_gradient.parse(v); }
void set_weight_gradient_for_testing(std::optional<WeightGradient> where) {
  g_weight_gradient.force_for_testing(where);
}
const char* weight_gradient_name(WeightGradient where) { return g_weight_gradient.name(where); }

}  // namespace tandem::kernels
