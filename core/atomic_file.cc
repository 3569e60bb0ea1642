#include "core/atomic_file.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <system_error>

#include "core/check.h"

namespace tandem {

namespace fs = std::filesystem;

void write_file_atomically(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  // Unique per process: two ranks or two jobs writing the same file never share a temporary file.
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      TANDEM_CHECK(out.good(), "cannot write {}: cannot create a file in {}", path.string(),
                   path.has_parent_path() ? path.parent_path().string() : std::string("."));
      write(out);
      out.flush();
      TANDEM_CHECK(out.good(), "cannot write {}: writing failed (disk full?)", path.string());
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    TANDEM_CHECK(!ec, "cannot write {}: cannot replace it: {}", path.string(), ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  write_file_atomically(path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

}  // namespace tandem
