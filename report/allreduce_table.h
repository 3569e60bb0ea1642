// Reads an all_reduce timing table in the nccl-tests format, as
// `tandem bench allreduce` prints it (and nccl-tests' all_reduce_perf):
// comment lines start with '#'; each data line is
//   size count type redop root  time algbw busbw #wrong  time algbw busbw #wrong
// (bytes, elements, ..., then out-of-place and in-place results, times in us).
// The world size is taken from Tandem's header line ("# tandem bench
// allreduce: backend ring, 4 ranks, ...") unless the caller gives it.
//
// Strict: a data line that does not parse, a table with no rows, or no world
// size is an error naming the file and line.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::report {

struct AllreduceRow {
  double bytes = 0;
  double out_of_place_us = 0;
  double in_place_us = 0;
  int line = 0;  // 1-based, in the file
};

struct AllreduceTable {
  std::string path;
  int world_size = 0;
  std::string backend;  // from the header, "" when not given
  std::vector<AllreduceRow> rows;
};

// `world_size` 0: read it from the header.
AllreduceTable parse_allreduce_table(const std::string& text, const std::string& path, int world_size = 0);
AllreduceTable read_allreduce_table(const std::filesystem::path& path, int world_size = 0);

}  // namespace tandem::report
