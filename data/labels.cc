#include "data/labels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <numeric>

#include "data/text_file.h"

namespace tandem::data {

namespace {
// Large enough for any real label set, small enough that "0".."max" stays a sane class list.
constexpr int64_t kMaxClasses = 100000;
}  // namespace

std::optional<int64_t> parse_integer(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

LabelResolver::LabelResolver(std::vector<std::string> class_names)
    : fixed_(!class_names.empty()), names_(std::move(class_names)) {
  for (size_t i = 0; i < names_.size(); ++i) index_.emplace(names_[i], static_cast<int32_t>(i));
}

int32_t LabelResolver::from_integer(int64_t value, const std::string& where) {
  if (fixed_) {
    if (value < 0 || value >= static_cast<int64_t>(names_.size()))
      throw_input_error(where, fmt::format("label {} is outside [0, {}) (classes: {})", value, names_.size(),
                                           fmt::join(names_, ", ")));
    return static_cast<int32_t>(value);
  }
  if (kind_ == Kind::Names)
    throw_input_error(where, fmt::format("label {} is an integer but earlier labels were class names", value));
  kind_ = Kind::Integers;
  if (value < 0) throw_input_error(where, fmt::format("label {} is negative", value));
  if (value >= kMaxClasses)
    throw_input_error(where, fmt::format("label {} is too large (at most {} classes)", value, kMaxClasses));
  max_integer_ = std::max(max_integer_, value);
  return static_cast<int32_t>(value);
}

int32_t LabelResolver::from_text(std::string_view text, const std::string& where) {
  std::string_view t = trim(text);
  if (t.empty()) throw_input_error(where, "empty label");
  if (fixed_) {
    if (auto it = index_.find(std::string(t)); it != index_.end()) return it->second;
    if (auto v = parse_integer(t)) return from_integer(*v, where);
    throw_input_error(where, fmt::format("label '{}' is not one of the classes ({})", t, fmt::join(names_, ", ")));
  }
  if (auto v = parse_integer(t)) return from_integer(*v, where);
  return from_name(t, where);
}

int32_t LabelResolver::from_name(std::string_view name, const std::string& where) {
  if (kind_ == Kind::Integers)
    throw_input_error(where, fmt::format("label '{}' is a name but earlier labels were integers", name));
  kind_ = Kind::Names;
  auto [it, inserted] = index_.emplace(std::string(name), static_cast<int32_t>(names_.size()));
  if (inserted) {
    if (static_cast<int64_t>(names_.size()) >= kMaxClasses)
      throw_input_error(where, fmt::format("more than {} distinct labels", kMaxClasses));
    names_.emplace_back(name);
  }
  return it->second;
}

void LabelResolver::finish(Dataset& dataset) const {
  if (fixed_ || kind_ == Kind::Unknown) {
    dataset.class_names = names_;
    return;
  }
  if (kind_ == Kind::Integers) {
    dataset.class_names.clear();
    for (int64_t i = 0; i <= max_integer_; ++i) dataset.class_names.push_back(std::to_string(i));
    return;
  }
  // Names in sorted order; remap the provisional first-appearance indices.
  std::vector<int32_t> order(names_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return names_[a] < names_[b]; });
  std::vector<int32_t> new_index(names_.size());
  dataset.class_names.clear();
  for (size_t r = 0; r < order.size(); ++r) {
    new_index[static_cast<size_t>(order[r])] = static_cast<int32_t>(r);
    dataset.class_names.push_back(names_[static_cast<size_t>(order[r])]);
  }
  for (Example& e : dataset.examples) e.label = new_index[static_cast<size_t>(e.label)];
}

}  // namespace tandem::data
