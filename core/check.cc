#include "core/check.h"

#include <cstring>

namespace tandem {

void throw_error(const char* file, int line, const std::string& message) {
  // Keep only the path below the source root (the earliest top-level folder in
  // the path): messages stay short and stable across checkouts.
  const char* short_file = file;
  const char* best = nullptr;
  for (const char* root : {"/core/", "/kernels/", "/comm/", "/ddp/", "/nn/", "/optim/", "/data/", "/train/",
                           "/profile/", "/report/", "/apps/", "/tests/", "/bench/"}) {
    const char* p = std::strstr(file, root);
    if (p && (!best || p < best)) best = p;
  }
  if (best) short_file = best + 1;
  throw Error(fmt::format("{}:{}: {}", short_file, line, message));
}

}  // namespace tandem
