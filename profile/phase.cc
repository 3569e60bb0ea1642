#include "profile/phase.h"

namespace tandem::profile {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::DataWait: return "data_wait";
    case Phase::H2D: return "h2d";
    case Phase::Forward: return "forward";
    case Phase::BackwardCompute: return "backward_compute";
    case Phase::CommWait: return "comm_wait";
    case Phase::Optimizer: return "optimizer";
    case Phase::Logging: return "logging";
  }
  return "?";
}

std::optional<Phase> parse_phase(std::string_view name) {
  for (Phase p : kAllPhases)
    if (phase_name(p) == name) return p;
  return std::nullopt;
}

bool is_device_phase(Phase phase) {
  return phase == Phase::H2D || phase == Phase::Forward || phase == Phase::BackwardCompute ||
         phase == Phase::CommWait || phase == Phase::Optimizer;
}

}  // namespace tandem::profile
