#include "data/jsonl.h"

#include <cstdint>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "data/labels.h"
#include "data/text_file.h"

namespace tandem::data {

Dataset read_jsonl(const std::filesystem::path& path, const JsonlOptions& options) {
  const std::string text = read_text_file(path);
  LabelResolver labels(options.class_names);
  Dataset dataset;
  for_each_line(text, [&](int64_t number, std::string_view line) {
    if (trim(line).empty()) return;
    const std::string where = location(path, number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw_input_error(where, fmt::format("invalid JSON: {}", e.what()));
    }
    if (!record.is_object())
      throw_input_error(where, fmt::format("expected a JSON object, found {}", record.type_name()));

    auto t = record.find(options.text_field);
    if (t == record.end()) throw_input_error(where, fmt::format("missing text field '{}'", options.text_field));
    if (!t->is_string())
      throw_input_error(where,
                        fmt::format("text field '{}' must be a string, found {}", options.text_field, t->type_name()));
    std::string_view body = trim(t->get_ref<const std::string&>());
    if (body.empty()) throw_input_error(where, fmt::format("empty text in field '{}'", options.text_field));

    auto l = record.find(options.label_field);
    if (l == record.end()) throw_input_error(where, fmt::format("missing label field '{}'", options.label_field));
    int32_t label = 0;
    if (l->is_number_unsigned() && l->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      // get<int64_t> would wrap it around to a negative label.
      throw_input_error(where, fmt::format("label {} is too large", l->get<uint64_t>()));
    } else if (l->is_number_integer()) {
      label = labels.from_integer(l->get<int64_t>(), where);
    } else if (l->is_string()) {
      label = labels.from_text(l->get_ref<const std::string&>(), where);
    } else {
      throw_input_error(where, fmt::format("label field '{}' must be an integer or a string, found {} ({})",
                                           options.label_field, l->type_name(), l->dump()));
    }
    dataset.examples.push_back({std::string(body), label, where});
  });
  labels.finish(dataset);
  return dataset;
}

}  // namespace tandem::data
