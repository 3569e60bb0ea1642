#include "apps/saved_model.h"

#include <algorithm>
#include <cmath>

#include "train/checkpoint.h"
#include "train/setup.h"
#include "core/check.h"
#include "core/stream.h"

namespace tandem::apps {

namespace fs = std::filesystem;

SavedModel load_saved_model(const fs::path& checkpoint, const std::vector<std::string>& overrides) {
  TANDEM_CHECK(fs::is_directory(checkpoint), "checkpoint folder {} does not exist", checkpoint.string());
  SavedModel s;
  s.config = train::load_train_config((checkpoint / "config.yaml").string(), overrides);
  validate(s.config);
  s.tokenizer = std::make_shared<data::Tokenizer>(data::Tokenizer::load(data::Tokenizer::file_in(checkpoint)));
  train::Checkpoint ck = train::load_checkpoint(checkpoint);
  s.class_names = ck.state.class_names;
  TANDEM_CHECK(s.class_names.size() >= 2, "{}: trainer_state.json lists {} classes", checkpoint.string(),
               s.class_names.size());
  // The trainer's own mapping from config to model, so a saved model is rebuilt exactly as it was trained.
  const nn::TextClassifierConfig mc =
      train::model_config(s.config, s.tokenizer->vocab_size(), static_cast<int64_t>(s.class_names.size()));
  s.model = std::make_shared<nn::TextClassifier>(mc, 0);
  s.model->load_state_dict(ck.model);  // strict: a model/config mismatch names the parameter
  // A model saved after it diverged predicts "nan" for every text; say so
  // where the cause is, naming the first bad weight.
  for (const auto& [name, t] : ck.model.tensors) {
    if (!is_floating(t.dtype())) continue;
    const std::vector<double> v = t.to_double_vector();
    const auto bad = std::find_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); });
    TANDEM_CHECK(bad == v.end(),
                 "{}: weight '{}' holds {} at element {}: the model diverged before this checkpoint was saved (use an "
                 "earlier checkpoint, or a lower learning_rate)",
                 (checkpoint / "model.safetensors").string(), name, std::isnan(*bad) ? "NaN" : "an infinity",
                 bad - v.begin());
  }
  s.device = s.config.device == "cpu" || !cuda::available() ? Device::cpu() : Device::cuda(0);
  TANDEM_CHECK(s.config.device != "cuda" || cuda::available(), "device cuda requested but no CUDA device is present");
  s.model->to(s.device);
  s.model->train(false);
  return s;
}

}  // namespace tandem::apps
