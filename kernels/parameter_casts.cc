// TANDEM_PARAMETER_CASTS (see parameter_casts.h).
#include "kernels/parameter_casts.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<ParameterCastMode, 2> g_parameter_casts{
    "TANDEM_PARAMETER_CASTS", {{"each", ParameterCastMode::Each}, {"batched", ParameterCastMode::Batched}}};

}  // namespace

ParameterCastMode parameter_casts() { return g_parameter_casts.value(); }
ParameterCastMode parse_parameter_casts(const char* v) { return g_parameter_casts.parse(v); }
void set_parameter_casts_for_testing(std::optional<ParameterCastMode> how) { g_parameter_casts.force_for_testing(how); }
const char* parameter_casts_name(ParameterCastMode how) { return g_parameter_casts.name(how); }

}  // namespace tandem::kernels
