// Where a tensor's bytes live: host memory or CUDA device n.
#pragma once

#include <string>

namespace tandem {

struct Device {
  enum class Kind : unsigned char { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int index = 0) { return {Kind::CUDA, index}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu" or "cuda:N"
};

// Parses "cpu", "cuda" or "cuda:N"; throws Error naming the text otherwise.
Device parse_device(const std::string& text);

}  // namespace tandem
