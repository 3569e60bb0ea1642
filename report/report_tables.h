// The report's tables as typed rows: one struct per table with a named field
// per column, built from the bench results, and one function per output form
// (the text report's fixed-width table, summary.csv, summary.tex) that spells
// the fields as strings. Rows keep numbers unformatted until then, so a column
// is found by name, never by position.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/bench_files.h"
#include "report/tables.h"
#include "report/training_run.h"

namespace tandem::report {

// A bucket sweep case's name in tables: the cap in MB ("25"), or "one bucket".
std::string bucket_cap_label(const RunFacts& f);

// One world size of the scaling bench.
struct ScalingTableRow {
  int ranks = 1;
  double samples_per_second = 0;
  double speedup = 0;
  double efficiency = 0;
  double step_ms = 0;  // median
  double step_p10_ms = 0;
  double step_p90_ms = 0;
  double compute_ms = 0;  // forward + backward autograd pass
  double comm_ms = 0;
  double exposed_comm_ms = 0;
  double data_wait_ms = 0;
  double epoch_seconds = 0;  // estimated: epoch examples / throughput
};
// Sorted by world size (scaling_table's order).
std::vector<ScalingTableRow> scaling_table_rows(const ScalingBench& s);
Table scaling_text_table(const std::vector<ScalingTableRow>& rows);
Table scaling_latex_table(const std::vector<ScalingTableRow>& rows);

// One bucket size of the sweep.
struct BucketTableRow {
  std::string cap;                    // bucket_cap_label
  std::vector<int64_t> bucket_bytes;  // DDP's buckets in launch order
  double step_ms = 0;
  double step_p10_ms = 0;
  double step_p90_ms = 0;
  double samples_per_second = 0;
  double comm_ms = 0;
  double exposed_comm_ms = 0;
  double overlap = 0;       // overlap_fraction: NaN without all-reduce
  double compute_comm = 0;  // compute_comm_ratio: +inf without all-reduce
};
// In sweep order.
std::vector<BucketTableRow> bucket_table_rows(const BucketsBench& b);
Table bucket_text_table(const std::vector<BucketTableRow>& rows);
Table bucket_latex_table(const std::vector<BucketTableRow>& rows);

// One precision of the step bench.
struct StepTableRow {
  std::string precision;
  int ranks = 1;
  int64_t per_device_batch = 0;
  double samples_per_second = 0;
  double step_ms = 0;
  double step_p10_ms = 0;
  double step_p90_ms = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double optimizer_ms = 0;
  int64_t peak_memory_bytes = 0;
};
std::vector<StepTableRow> step_table_rows(const StepBench& s);
Table step_text_table(const std::vector<StepTableRow>& rows);
Table step_latex_table(const std::vector<StepTableRow>& rows);

// One training run (the text report's table and training.csv).
struct TrainingTableRow {
  std::string label;
  int ranks = 1;
  double final_accuracy = 0;
  double best_accuracy = 0;  // the best evaluation
  size_t evaluations = 0;
  std::optional<double> mean_epoch_seconds;  // epochs 2.. (none with fewer than two evaluations)
  double train_seconds = 0;
  double samples_per_second = 0;
  std::string dir;
};
std::vector<TrainingTableRow> training_table_rows(const std::vector<TrainingRun>& runs);
Table training_table(const std::vector<TrainingTableRow>& rows);

// One measured case of any bench (summary.csv: every number, full precision).
struct CaseTableRow {
  std::string bench;  // scaling | buckets | step
  Profile profile;
  std::optional<double> speedup;  // scaling cases only
  std::optional<double> efficiency;
};
// Scaling cases (in file order), then the bucket sweep's, then the step bench's.
std::vector<CaseTableRow> case_table_rows(const BenchFolder& b);
Table case_table(const std::vector<CaseTableRow>& rows);

}  // namespace tandem::report
