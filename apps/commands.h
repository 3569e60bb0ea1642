// Subcommands of the `tandem` program. Each add_*_command registers its
// options and a callback that runs the command and throws tandem::Error on failure.
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::apps {

void add_info_command(CLI::App& app);      // build configuration and devices
void add_data_command(CLI::App& app);      // dataset inspection: fortune categories, class counts
void add_train_command(CLI::App& app);     // train a classifier
void add_evaluate_command(CLI::App& app);  // evaluate a checkpoint
void add_predict_command(CLI::App& app);   // classify texts with a checkpoint
void add_launch_command(CLI::App& app);    // one process per rank (comm/launcher.h)
void add_trace_command(CLI::App& app);     // timeline traces: merge the ranks' files
void add_bench_allreduce_command(CLI::App& bench);  // under `tandem bench`: nccl-tests style all_reduce table

}  // namespace tandem::apps
