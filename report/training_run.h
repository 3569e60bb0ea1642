// A finished `tandem train` run, read back from its output_dir
// (eval_log.csv, train_log.csv, results.json) for the report's accuracy and
// epoch-time plots.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::report {

struct EvalPoint {
  double epoch = 0;
  double accuracy = 0;
  double loss = 0;
  double elapsed_s = 0;  // since the job started (rank 0), when this evaluation finished
};

struct TrainingRun {
  std::string label;  // "1 rank", "2 ranks", or what the user named it
  std::filesystem::path dir;
  int world_size = 1;
  double samples_per_second = 0;  // results.json (0 when absent)
  double train_seconds = 0;
  double final_accuracy = 0;
  std::vector<EvalPoint> evals;  // in order
  // Time of epochs 2.. (differences of consecutive epoch-end evaluations, each
  // including one evaluation); epoch 1 also holds start-up and is left out.
  std::vector<std::pair<int, double>> epoch_seconds() const;
};

// Reads eval_log.csv (required) and results.json (optional); errors name the file and line.
TrainingRun read_training_run(const std::filesystem::path& dir, const std::string& label);

}  // namespace tandem::report
