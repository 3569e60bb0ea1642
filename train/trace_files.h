// Trace files on disk: finding each rank's trace_rank<R>.json and merging
// them into one file (profile::merge_traces), for `tandem trace merge` and
// for rank 0 at the end of a profiling window.
#pragma once

#include <filesystem>
#include <vector>

namespace tandem::train {

// `inputs` are trace files or folders holding trace_rank<R>.json files; the
// result lists files in rank-number order (by file name; files named
// otherwise first). Throws Error for a missing path or a folder without traces.
std::vector<std::filesystem::path> find_rank_traces(const std::vector<std::filesystem::path>& inputs);
// Reads and merges `files` into `out` (written atomically); returns how many events it holds.
size_t merge_trace_files(const std::vector<std::filesystem::path>& files, const std::filesystem::path& out);

}  // namespace tandem::train
