// A trained classifier loaded back from a checkpoint folder: its config,
// tokenizer, class names and weights, ready for `tandem evaluate` and
// `tandem predict`.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "train/config.h"
#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace tandem::apps {

struct SavedModel {
  train::TrainConfig config;
  std::shared_ptr<data::Tokenizer> tokenizer;
  std::vector<std::string> class_names;
  std::shared_ptr<nn::TextClassifier> model;  // in eval mode, on `device`
  Device device;
};

// `overrides` apply to the saved config (e.g. data.test_path=..., device=cpu).
SavedModel load_saved_model(const std::filesystem::path& checkpoint, const std::vector<std::string>& overrides);

}  // namespace tandem::apps
