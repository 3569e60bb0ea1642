// Writing a file so that readers see the old content or the new, never half of
// it: the bytes go to a temporary file beside the target (unique per process),
// which is flushed, checked and renamed over the target. On any failure (the
// folder is missing or not writable, the disk is full, the writer throws) the
// temporary file is removed, the target is left as it was, and Error names the
// path. Checkpoints, results and metrics files all go through here.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace tandem {

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);
// For large outputs written piece by piece (safetensors): `write` streams into the temporary file.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace tandem
