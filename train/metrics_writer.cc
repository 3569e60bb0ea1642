#include "train/metrics_writer.h"

#include <fmt/format.h>

#include "core/check.h"

namespace tandem::train {

namespace fs = std::filesystem;

namespace {

// A CSV cell: empty for null (no value, e.g. overlap_pct without communication).
std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string csv_row(const nlohmann::json& record, const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) line += ',';
    line += csv_cell(record.value(columns[i], nlohmann::json()));
  }
  return line + "\n";
}

std::string csv_header(const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) line += (i ? "," : "") + columns[i];
  return line + "\n";
}

}  // namespace

const std::vector<std::string>& MetricsWriter::train_log_columns() {
  static const std::vector<std::string> columns = {
      "step",         "epoch",        "loss",          "learning_rate",       "grad_norm",        "samples_per_second",
      "forward_ms",   "backward_compute_ms",           "backward_comm_ms",    "overlap_ms",       "data_wait_ms",
      "elapsed_s",    "step_ms",      "h2d_ms",        "comm_wait_ms",        "optimizer_ms",     "logging_ms",
      "other_ms",     "comm_ms",      "overlap_pct",   "peak_memory_mb"};
  return columns;
}

const std::vector<std::string>& MetricsWriter::eval_log_columns() {
  static const std::vector<std::string> columns = {"step",      "epoch",         "eval_loss", "eval_accuracy",
                                                    "elapsed_s", "eval_macro_f1", "split"};
  return columns;
}

MetricsWriter::MetricsWriter(const fs::path& dir, bool append) {
  const auto mode = append ? std::ios::app : std::ios::trunc;
  const bool new_train = !append || !fs::exists(dir / "train_log.csv");
  const bool new_eval = !append || !fs::exists(dir / "eval_log.csv");
  jsonl_.open(dir / "metrics.jsonl", mode);
  train_csv_.open(dir / "train_log.csv", mode);
  eval_csv_.open(dir / "eval_log.csv", mode);
  TANDEM_CHECK(jsonl_.good() && train_csv_.good() && eval_csv_.good(), "cannot write metrics under {}", dir.string());
  if (new_train) train_csv_ << csv_header(train_log_columns());
  if (new_eval) eval_csv_ << csv_header(eval_log_columns());
}

void MetricsWriter::train(const nlohmann::json& j) {
  record(j);
  train_csv_ << csv_row(j, train_log_columns());
  train_csv_.flush();
}

void MetricsWriter::eval(const nlohmann::json& j) {
  record(j);
  eval_csv_ << csv_row(j, eval_log_columns());
  eval_csv_.flush();
}

void MetricsWriter::record(const nlohmann::json& j) {
  jsonl_ << j.dump() << "\n";
  jsonl_.flush();
}

}  // namespace tandem::train
