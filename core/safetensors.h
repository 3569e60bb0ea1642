// Named tensors in the safetensors format (the Hugging Face format PyTorch's
// `safetensors` package reads): an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the
// raw little-endian bytes of every tensor.
//
// save_safetensors writes to "<path>.tmp" and renames it over `path`, so a
// crash mid-write never leaves a truncated file where a good one was.
// load_safetensors validates the whole header (JSON, dtypes, offsets inside
// the file, no overlaps, sizes matching shapes) and reports the file and the
// tensor at fault.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tandem {

struct NamedTensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the order they were added
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;
};

void save_safetensors(const std::string& path, const NamedTensors& tensors);
NamedTensors load_safetensors(const std::string& path);  // tensors on the CPU, in file order

}  // namespace tandem
