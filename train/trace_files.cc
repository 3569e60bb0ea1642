#include "train/trace_files.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "train/checkpoint.h"
#include "core/check.h"
#include "profile/trace.h"

namespace tandem::train {

namespace fs = std::filesystem;

std::vector<fs::path> find_rank_traces(const std::vector<fs::path>& inputs) {
  static const std::regex name(R"(trace_rank(\d+)\.json)");
  std::vector<std::pair<long, fs::path>> found;
  for (const fs::path& in : inputs) {
    TANDEM_CHECK(fs::exists(in), "trace: {} does not exist", in.string());
    if (!fs::is_directory(in)) {
      std::smatch m;
      const std::string file = in.filename().string();
      found.emplace_back(std::regex_match(file, m, name) ? std::stol(m[1]) : -1, in);
      continue;
    }
    size_t before = found.size();
    for (const auto& entry : fs::directory_iterator(in)) {
      std::smatch m;
      const std::string file = entry.path().filename().string();
      if (entry.is_regular_file() && std::regex_match(file, m, name)) found.emplace_back(std::stol(m[1]), entry.path());
    }
    TANDEM_CHECK(found.size() > before, "trace: no trace_rank<R>.json files in {}", in.string());
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<fs::path> out;
  for (auto& [rank, path] : found) out.push_back(std::move(path));
  return out;
}

size_t merge_trace_files(const std::vector<fs::path>& files, const fs::path& out) {
  std::vector<std::pair<std::string, nlohmann::json>> traces;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    TANDEM_CHECK(in.good(), "trace: cannot read {}", f.string());
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    TANDEM_CHECK(!j.is_discarded(), "trace: {} is not valid JSON (a trace cut short?)", f.string());
    traces.emplace_back(f.string(), std::move(j));
  }
  nlohmann::json merged = profile::merge_traces(traces);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  write_file_atomically(out, merged.dump() + "\n");
  return merged["traceEvents"].size();
}

}  // namespace tandem::train
