// TANDEM_BIAS_GRADIENT (see bias_gradient.h).
#include "kernels/bias_gradient.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<BiasGradient, 2> g_bias_gradient{
    "TANDEM_BIAS_GRADIENT", {{"row", BiasGradient::Row}, {"gemm", BiasGradient::Gemm}}};

}  // namespace

BiasGradient bias_gradient() { return g_bias_gradient.value(); }
BiasGradient parse_bias_gradient(const char* v) { return g_bias_gradient.parse(v); }
void set_bias_gradient_for_testing(std::optional<BiasGradient> where) { g_bias_gradient.force_for_testing(where); }
const char* bias_gradient_name(BiasGradient where) { return g_bias_gradient.name(where); }

}  // namespace tandem::kernels
