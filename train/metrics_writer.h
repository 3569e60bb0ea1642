// The metrics of a training job, written by rank 0 into its output_dir as it
// goes: metrics.jsonl (one JSON record per line: "train", "eval" and "ddp"
// records) and the same train and eval records as CSV (train_log.csv,
// eval_log.csv) for spreadsheets. Every record is flushed when written, so a
// killed job keeps what it logged. Resuming appends.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tandem::train {

class MetricsWriter {
 public:
  // `append`: continue the files of an earlier run (--resume) instead of starting them afresh.
  MetricsWriter(const std::filesystem::path& dir, bool append);

  // A "train" record: metrics.jsonl and a train_log.csv row (columns: train_log_columns()).
  void train(const nlohmann::json& record);
  // An "eval" record: metrics.jsonl and an eval_log.csv row (columns: eval_log_columns()).
  void eval(const nlohmann::json& record);
  // Any other record (DDP's logging data): metrics.jsonl only.
  void record(const nlohmann::json& record);

  // train_log.csv's columns, in order: the first twelve as they always were, then the
  // step profiler's (docs/profiling.md says what each one means).
  static const std::vector<std::string>& train_log_columns();
  static const std::vector<std::string>& eval_log_columns();

 private:
  std::ofstream jsonl_, train_csv_, eval_csv_;
};

}  // namespace tandem::train
