// The `tandem` command line. Each subcommand lives in its own file and
// registers itself here; errors become one line on stderr and exit code 1.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "apps/commands.h"
#include "core/check.h"

int main(int argc, char** argv) {
  CLI::App app{"Tandem: data-parallel training of small transformer text classifiers"};
  app.require_subcommand(1);
  tandem::apps::add_info_command(app);
  tandem::apps::add_data_command(app);
  tandem::apps::add_train_command(app);
  tandem::apps::add_evaluate_command(app);
  tandem::apps::add_predict_command(app);
  tandem::apps::add_launch_command(app);
  tandem::apps::add_trace_command(app);
  auto* bench = app.add_subcommand("bench", "Benchmarks")->require_subcommand(1);
  tandem::apps::add_bench_allreduce_command(*bench);
  tandem::apps::add_bench_buckets_command(*bench);
  tandem::apps::add_bench_scaling_command(*bench);
  tandem::apps::add_bench_step_command(*bench);
  tandem::apps::add_bench_ops_command(*bench);
  tandem::apps::add_bench_export_data_command(*bench);
  tandem::apps::add_bench_predict_command(*bench);
  tandem::apps::add_bench_worker_command(*bench);
  tandem::apps::add_find_batch_size_command(app);
  tandem::apps::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
