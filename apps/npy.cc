#include "apps/npy.h"

#include <fmt/format.h>

#include <bit>
#include <fstream>

#include "core/atomic_file.h"
#include "core/check.h"

namespace tandem::apps {

std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const void* data, size_t nbytes) {
  static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);  // (3,) keeps its comma, (3, 4) does not
  else if (shape.size() == 1)
    dims.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t prefix = 10;  // magic (6) + version (2) + header length (2)
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header += '\n';
  TANDEM_CHECK(header.size() < 65536, "npy header too long");
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), nbytes);
  return out;
}

void write_npy(const std::filesystem::path& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* data, size_t nbytes) {
  write_file_atomically(path, npy_bytes(descr, shape, data, nbytes));
}

}  // namespace tandem::apps
