// `tandem bench export-data`: a config's training and test splits, tokenized
// exactly as `tandem train` tokenizes them, as NumPy files, so the PyTorch
// reference (bench/pytorch/train_classifier.py) trains on identical token ids.
//
//   tandem bench export-data --config configs/fortunes_demo.yaml --out /tmp/fortunes_npy
//
// Writes {train,test}_ids.npy (int32 [N, max_seq_len]), {train,test}_mask.npy
// (uint8, 1 = token), {train,test}_labels.npy (int64 [N]), vocab.txt (tokenizer.json for BPE) and
// meta.json (vocab size, classes, sequence length, the config).
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>

#include "apps/commands.h"
#include "apps/npy.h"
#include "train/setup.h"
#include "core/check.h"
#include "data/batch_source.h"
#include "data/tokenizer.h"
#include "report/bench_files.h"

namespace tandem::apps {

namespace {

namespace fs = std::filesystem;

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
};

void export_split(const data::TextClassificationSource& source, const fs::path& dir, const std::string& split) {
  const int64_t n = source.size(), s = source.seq_len();
  std::vector<int32_t> ids(static_cast<size_t>(n * s));
  std::vector<uint8_t> mask(static_cast<size_t>(n * s));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  data::BatchBuffers out{ids.data(), DType::I32, mask.data(), labels.data()};
  source.fill(indices, out);
  write_npy(dir / (split + "_ids.npy"), "<i4", {n, s}, ids.data(), ids.size() * sizeof(int32_t));
  write_npy(dir / (split + "_mask.npy"), "|u1", {n, s}, mask.data(), mask.size());
  write_npy(dir / (split + "_labels.npy"), "<i8", {n}, labels.data(), labels.size() * sizeof(int64_t));
}

// What the PyTorch twin needs to build the same model and optimizer.
nlohmann::json model_json(const train::TrainConfig& c) {
  const train::ModelConfig& m = c.model;
  return {{"d_model", m.d_model},         {"n_heads", m.n_heads},
          {"num_layers", m.num_layers},   {"dim_feedforward", m.dim_feedforward},
          {"max_seq_len", m.max_seq_len}, {"dropout", m.dropout},
          {"pooling", m.pooling},         {"activation", m.activation},
          {"norm_first", m.norm_first}};
}

nlohmann::json training_json(const train::TrainConfig& c) {
  return {{"per_device_train_batch_size", c.per_device_train_batch_size},
          {"gradient_accumulation_steps", c.gradient_accumulation_steps},
          {"optim", c.optim},
          {"learning_rate", c.learning_rate},
          {"weight_decay", c.weight_decay},
          {"adam_beta1", c.adam_beta1},
          {"adam_beta2", c.adam_beta2},
          {"adam_epsilon", c.adam_epsilon},
          {"momentum", c.momentum},
          {"max_grad_norm", c.max_grad_norm},
          {"label_smoothing_factor", c.label_smoothing_factor},
          {"bf16", c.bf16},
          {"fp16", c.fp16},
          {"seed", c.seed},
          {"logging_steps", c.logging_steps},
          {"ddp_bucket_cap_mb", c.ddp_bucket_cap_mb},
          {"ddp_static_graph", c.ddp_static_graph},
          {"ddp_gradient_as_bucket_view", c.ddp_gradient_as_bucket_view},
          {"ddp_find_unused_parameters", c.ddp_find_unused_parameters},
          {"padding", c.data.padding},
          {"pad_to_multiple_of", c.data.pad_to_multiple_of},
          {"group_by_length", c.group_by_length}};
}

void run(const Args& a) {
  const train::TrainConfig config = train::load_train_config(a.config, a.overrides);
  validate(config);
  const train::TrainingData d = train::load_training_data(config);
  const auto& train_set = d.train;
  const auto& test_set = d.test;
  const auto& tokenizer = d.tokenizer;
  const fs::path dir = a.out;
  fs::create_directories(dir);
  export_split(data::TextClassificationSource(train_set, tokenizer, config.model.max_seq_len), dir, "train");
  export_split(data::TextClassificationSource(test_set, tokenizer, config.model.max_seq_len), dir, "test");
  tokenizer->save(dir / tokenizer->file_name());
  report::write_json(dir / "meta.json", {{"config", a.config},
                                         {"overrides", a.overrides},
                                         {"vocab_size", tokenizer->vocab_size()},
                                         {"num_classes", train_set->num_classes()},
                                         {"class_names", train_set->class_names},
                                         {"seq_len", config.model.max_seq_len},
                                         {"pad_id", data::Tokenizer::kPad},
                                         {"train_examples", train_set->size()},
                                         {"test_examples", test_set->size()},
                                         {"model", model_json(config)},
                                         {"training", training_json(config)}});
  fmt::print("wrote {} training and {} test examples ({} tokens each, vocabulary {}) to {}\n", train_set->size(),
             test_set->size(), config.model.max_seq_len, tokenizer->vocab_size(), dir.string());
}

}  // namespace

void add_bench_export_data_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("export-data", "Tokenized train/test splits as .npy files (for the PyTorch twin)");
  auto a = std::make_shared<Args>();
  cmd->add_option("--config", a->config, "Training config (YAML)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key");
  cmd->add_option("--out", a->out, "Output folder")->required();
  cmd->callback([a] { run(*a); });
}

}  // namespace tandem::apps
