// `tandem trace merge`: every rank's timeline in one Chrome trace file.
#include <fmt/format.h>

#include <filesystem>

#include "apps/commands.h"
#include "train/trace_files.h"

namespace tandem::apps {

void add_trace_command(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "Timeline traces (Chrome trace JSON, opens in ui.perfetto.dev)");
  trace->require_subcommand(1);
  auto* merge = trace->add_subcommand("merge", "Merge the ranks' trace_rank<R>.json files into one timeline");
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  merge->add_option("inputs", args->inputs, "folders holding trace_rank<R>.json files, or trace files")->required();
  merge->add_option("-o,--output", args->out, "the merged trace (default: <first folder>/trace.json)");
  merge->callback([args] {
    std::vector<std::filesystem::path> inputs(args->inputs.begin(), args->inputs.end());
    std::vector<std::filesystem::path> files = train::find_rank_traces(inputs);
    std::filesystem::path out = args->out;
    if (out.empty()) {
      const std::filesystem::path& first = inputs.front();
      out = (std::filesystem::is_directory(first) ? first : first.parent_path()) / "trace.json";
    }
    const size_t events = train::merge_trace_files(files, out);
    fmt::print("merged {} trace(s), {} events, into {}\n", files.size(), events, out.string());
  });
}

}  // namespace tandem::apps
