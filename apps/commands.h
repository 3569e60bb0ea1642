// Subcommands of the `tandem` program. Each add_*_command registers its
// options and a callback that runs the command and throws tandem::Error on failure.
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::apps {

// The most ranks a command starts on one machine (tandem launch --nproc-per-node, the benches'
// --nproc): far above any machine's GPUs or useful CPU ranks, and low enough that a mistyped
// count is refused at once instead of forking processes for minutes.
constexpr int kMaxLocalRanks = 1024;

void add_info_command(CLI::App& app);      // build configuration and devices
void add_data_command(CLI::App& app);      // dataset inspection: fortune categories, class counts
void add_train_command(CLI::App& app);     // train a classifier
void add_evaluate_command(CLI::App& app);  // evaluate a checkpoint
void add_predict_command(CLI::App& app);   // classify texts with a checkpoint
void add_launch_command(CLI::App& app);    // one process per rank (comm/launcher.h)
void add_trace_command(CLI::App& app);     // timeline traces: merge the ranks' files
void add_bench_allreduce_command(CLI::App& bench);  // under `tandem bench`: nccl-tests style all_reduce table
void add_bench_buckets_command(CLI::App& bench);    // under `tandem bench`: step time per ddp_bucket_cap_mb
void add_bench_scaling_command(CLI::App& bench);    // under `tandem bench`: samples/s, speedup, efficiency per world size
void add_bench_step_command(CLI::App& bench);       // under `tandem bench`: step throughput and memory per precision
void add_bench_ops_command(CLI::App& bench);        // under `tandem bench`: time per op of one rank's step
void add_bench_export_data_command(CLI::App& bench);  // under `tandem bench`: tokenized data for the PyTorch twin
void add_bench_predict_command(CLI::App& bench);     // under `tandem bench`: step time per cap and world size, modelled
void add_bench_worker_command(CLI::App& bench);     // under `tandem bench`, hidden: one rank of a benchmark
void add_find_batch_size_command(CLI::App& app);    // the largest per-device batch that fits in memory
void add_report_command(CLI::App& app);             // CSV, LaTeX, plots and diagnosis from bench results

}  // namespace tandem::apps
