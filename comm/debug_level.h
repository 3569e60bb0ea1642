// The distributed debug level, PyTorch's TORCH_DISTRIBUTED_DEBUG.
//
// Read from TANDEM_DISTRIBUTED_DEBUG, or else TORCH_DISTRIBUTED_DEBUG (so a
// job script written for PyTorch turns it on here too): OFF (the default),
// INFO or DETAIL, case-insensitive. DETAIL makes init_process_group wrap the
// backend in a DebugProcessGroup (comm/debug_process_group.h), which checks
// every collective against the other ranks' before it runs. Anything else is
// an error naming the variable, not a silent OFF.
#pragma once

#include <string_view>

namespace tandem::comm {

enum class DebugLevel { Off, Info, Detail };

DebugLevel parse_debug_level(std::string_view value, std::string_view variable);
DebugLevel distributed_debug_level();  // from the environment, as above

}  // namespace tandem::comm
