// `tandem report`: from the bench results and training runs, everything a
// DDP tuning write-up needs, in one folder:
//   summary.csv            every measured case, one row each (all the numbers)
//   summary.tex            booktabs tables: scaling, and the bucket sweep
//   training.csv           one row per training run (accuracy, epoch time)
//   epoch_time.svg         per-epoch time of each training run (or the
//                          estimated epoch time per world size without runs)
//   speedup_efficiency.svg speedup and efficiency per world size, against ideal
//   throughput.svg         samples/s per world size (and per precision)
//   step_breakdown.svg     where a step's time goes, per world size
//   buckets.svg            step breakdown and overlap per bucket size
//   accuracy.svg           evaluation accuracy per epoch of each training run
//   report.txt             the tables, the automatic diagnosis, provenance
// A plot is written only when its inputs exist.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/bench_files.h"
#include "report/diagnosis.h"
#include "report/training_run.h"

namespace tandem::report {

struct ReportInputs {
  BenchFolder bench;
  std::vector<TrainingRun> runs;
  std::string command;  // how the report was made
  std::string date;
  Thresholds thresholds;  // what the diagnosis judges by; report.txt and the efficiency plot state them
};

// What the diagnosis looks at: the largest world size of the scaling bench
// (else the bucket sweep's current size, else the first step-bench case), with
// the scaling, bucket-sweep and batch-search facts when present. Throws when
// the folder holds no profile at all.
DiagnosisInput diagnosis_input(const BenchFolder& bench);

// The bucket sweep reduced for the diagnosis (best case, current case, noise).
BucketSweepFacts bucket_sweep_facts(const BucketsBench& b);

// Writes the files above into out_dir; returns the paths written. The text
// report is also returned through `text` when non-null.
std::vector<std::filesystem::path> write_report(const ReportInputs& in, const std::filesystem::path& out_dir,
                                                std::string* text = nullptr);

}  // namespace tandem::report
