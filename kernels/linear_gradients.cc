// TANDEM_LINEAR_GRADIENTS (see linear_gradients.h).
#include "kernels/linear_gradients.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<LinearGradients, 2> g_linear_gradients{
    "TANDEM_LINEAR_GRADIENTS", {{"cast", LinearGradients::Cast}, {"master", LinearGradients::Master}}};

}  // namespace

LinearGradients linear_gradients() { return g_linear_gradients.value(); }
LinearGradients parse_linear_gradients(const char* v) { return g_linear_gradients.parse(v); }
void set_linear_gradients_for_testing(std::optional<LinearGradients> where) {
  g_linear_gradients.force_for_testing(where);
}
const char* linear_gradients_name(LinearGradients where) { return g_linear_gradients.name(where); }

}  // namespace tandem::kernels
