#include "core/check.h"

#include <cstring>

namespace tandem {

void throw_error(const char* file, int line, const std::string& message) {
  // Keep only the path below the source root: messages stay short and stable.
  const char* short_file = file;
  for (const char* root : {"/core/", "/kernels/", "/comm/", "/ddp/", "/nn/", "/optim/", "/data/", "/apps/", "/tests/", "/bench/"}) {
    if (const char* p = std::strstr(file, root)) {
      short_file = p + 1;
      break;
    }
  }
  throw Error(fmt::format("{}:{}: {}", short_file, line, message));
}

}  // namespace tandem
