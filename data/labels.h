// Turning the label field of a record into a 0-based class index.
//
// With class names given (a test split reuses its train split's names), a
// label is one of the names or an integer index in [0, n). Without names the
// first label decides the kind: integers make classes "0".."max"; names are
// collected and sorted, so the mapping does not depend on the order of the
// file. Mixing the two kinds in one file is an error at the first record
// that differs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

// An integer written in `text` (optional '-', decimal digits, nothing else), or nullopt.
std::optional<int64_t> parse_integer(std::string_view text);

class LabelResolver {
 public:
  explicit LabelResolver(std::vector<std::string> class_names = {});

  // Each throws an input error at `where` ("path:line") for a label it cannot map.
  int32_t from_integer(int64_t value, const std::string& where);
  int32_t from_text(std::string_view text, const std::string& where);  // an integer literal or a class name

  // Sets dataset.class_names and, when names were collected, renumbers the labels
  // of dataset.examples (which must have come from this resolver) in sorted-name order.
  void finish(Dataset& dataset) const;

 private:
  enum class Kind { Unknown, Integers, Names };
  int32_t from_name(std::string_view name, const std::string& where);

  bool fixed_;
  Kind kind_ = Kind::Unknown;
  std::vector<std::string> names_;  // fixed names, or collected names in order of first appearance
  std::unordered_map<std::string, int32_t> index_;
  int64_t max_integer_ = -1;
};

}  // namespace tandem::data
