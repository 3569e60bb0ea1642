// results.json, the summary `tandem train` leaves in its output_dir (rank 0):
// steps, losses, accuracy (overall and per class), the majority-class
// baseline, training time and throughput, world size and backend. The report
// and the scaling benchmark read it back.
#pragma once

#include <filesystem>
#include <string>

#include "train/trainer.h"

namespace tandem::train {

// Writes output_dir/results.json atomically.
void write_train_results(const std::filesystem::path& output_dir, const TrainResult& r, int world_size,
                         const std::string& backend);

}  // namespace tandem::train
