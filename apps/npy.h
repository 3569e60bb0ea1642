// NumPy .npy files (format version 1.0): what `tandem bench export-data`
// writes so that Python reads Tandem's tokenized data with np.load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tandem::apps {

// The whole file: magic, version 1.0, the header dict padded with spaces to a
// multiple of 64 bytes and ended by '\n', then the raw C-order data.
// descr is NumPy's type string: "<i4", "<i8", "|u1", "<f4".
std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const void* data, size_t nbytes);

// Writes it atomically (temporary file, then rename).
void write_npy(const std::filesystem::path& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* data, size_t nbytes);

}  // namespace tandem::apps
