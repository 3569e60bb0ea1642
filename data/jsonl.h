// JSON Lines: one JSON object per line, e.g. {"text": "...", "label": 2}.
//
// The label may be an integer class index (0-based) or a class name string;
// see LabelResolver (data/labels.h) for how class names are fixed or
// inferred. Blank lines are skipped.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

struct JsonlOptions {
  std::string text_field = "text";
  std::string label_field = "label";
  std::vector<std::string> class_names;  // empty: inferred from the labels
};

// Throws an input error naming path:line for invalid JSON, a line that is not an
// object, a missing or non-string text, an empty text, a missing label or one that is
// not an integer or string, a label outside the classes, invalid UTF-8, or a missing file.
Dataset read_jsonl(const std::filesystem::path& path, const JsonlOptions& options = {});

}  // namespace tandem::data
