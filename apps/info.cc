// `tandem info`: what this build can do on this machine.
#include <fmt/format.h>

#include "apps/commands.h"
#include "core/stream.h"

namespace tandem::apps {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the build configuration and the CUDA devices found");
  cmd->callback([] {
    fmt::print("tandem {}\n", TANDEM_VERSION);
    fmt::print("cuda backend: {}\n", cuda::built_with_cuda() ? "built" : "not built");
    fmt::print("cuda devices: {}\n", cuda::device_count());
  });
}

}  // namespace tandem::apps
