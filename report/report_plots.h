// The report's plots, drawn but not written: each function turns one kind of
// bench result into SVG documents named by their file (report.h lists them).
// A plot whose inputs are missing is not drawn.
#pragma once

#include <string>
#include <vector>

#include "report/bench_files.h"
#include "report/diagnosis.h"
#include "report/training_run.h"

namespace tandem::report {

struct Plot {
  std::string file;  // "speedup_efficiency.svg"
  std::string svg;
};

// speedup_efficiency.svg, throughput.svg (with the step bench's precisions
// beside it when given), step_breakdown.svg, and, without training runs,
// epoch_time.svg estimated from throughput. The efficiency panel marks the
// diagnosis's poor-scaling threshold.
std::vector<Plot> scaling_plots(const ScalingBench& s, const StepBench* step, bool have_runs, const Thresholds& t);

// throughput.svg by precision (only when there is no scaling bench, which
// draws it), and memory.svg: peak memory by precision.
std::vector<Plot> step_plots(const StepBench& s, bool have_scaling);

// buckets.svg: step breakdown and overlap per bucket size.
std::vector<Plot> bucket_plots(const BucketsBench& b);

// accuracy.svg and epoch_time.svg: per epoch, one line per run.
std::vector<Plot> training_plots(const std::vector<TrainingRun>& runs);

}  // namespace tandem::report
