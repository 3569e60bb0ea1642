#include "data/fortunes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "data/text_file.h"

namespace tandem::data {

namespace {

bool is_category_file(const std::filesystem::directory_entry& entry) {
  std::error_code ec;
  if (entry.is_symlink(ec) || !entry.is_regular_file(ec)) return false;
  const std::string name = entry.path().filename().string();
  if (name.empty() || name.front() == '.') return false;
  const std::string ext = entry.path().extension().string();
  return ext != ".dat" && ext != ".u8";
}

void check_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw_input_error(dir.string(),
                      "no such folder (install the Debian packages 'fortunes' and 'fortunes-min': "
                      "apt-get install fortunes fortunes-min)");
}

}  // namespace

std::vector<std::string> default_fortune_categories() {
  return {"computers", "food", "politics", "sports", "startrek"};
}

std::vector<FortuneEntry> read_fortune_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  std::vector<FortuneEntry> entries;
  std::string current;
  int64_t start = 1;
  auto flush = [&] {
    std::string_view body = trim(current);
    if (!body.empty()) entries.push_back({std::string(body), start});
    current.clear();
  };
  for_each_line(text, [&](int64_t number, std::string_view line) {
    if (line == "%") {
      flush();
      start = number + 1;
      return;
    }
    if (current.empty()) start = number;
    current.append(line);
    current.push_back('\n');
  });
  flush();
  return entries;
}

std::vector<FortuneCategory> list_fortune_categories(const std::filesystem::path& dir) {
  check_folder(dir);
  std::vector<FortuneCategory> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) throw_input_error(dir.string(), fmt::format("cannot list the folder: {}", ec.message()));
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) throw_input_error(dir.string(), fmt::format("cannot list the folder: {}", ec.message()));
    if (!is_category_file(*it)) continue;
    out.push_back({it->path().filename().string(), it->path(), 0});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& c : out) c.entries = static_cast<int64_t>(read_fortune_file(c.path).size());
  return out;
}

Dataset read_fortunes(const std::vector<std::string>& categories, const std::filesystem::path& dir) {
  check_folder(dir);
  if (categories.empty()) throw_input_error(dir.string(), "no fortune categories chosen");
  std::set<std::string> seen;
  Dataset dataset;
  for (size_t label = 0; label < categories.size(); ++label) {
    const std::string& name = categories[label];
    if (!seen.insert(name).second) throw_input_error(dir.string(), fmt::format("category '{}' is listed twice", name));
    const std::filesystem::path path = dir / name;
    std::error_code ec;
    const std::filesystem::directory_entry entry(path, ec);
    if (ec || name.find('/') != std::string::npos || !is_category_file(entry)) {
      std::vector<std::string> names;
      for (const auto& c : list_fortune_categories(dir)) names.push_back(c.name);
      throw_input_error(dir.string(),
                        fmt::format("no fortune category '{}' (available: {})", name, fmt::join(names, ", ")));
    }
    auto entries = read_fortune_file(path);
    if (entries.empty()) throw_input_error(path.string(), "category has no entries");
    for (auto& e : entries)
      dataset.examples.push_back({std::move(e.text), static_cast<int32_t>(label), location(path, e.line)});
    dataset.class_names.push_back(name);
  }
  return dataset;
}

std::string describe_fortune_categories(const std::filesystem::path& dir) {
  auto categories = list_fortune_categories(dir);
  std::string out = fmt::format("{} fortune categories in {}\n", categories.size(), dir.string());
  int64_t total = 0;
  for (const auto& c : categories) {
    out += fmt::format("  {:<16} {:>6}\n", c.name, c.entries);
    total += c.entries;
  }
  out += fmt::format("  {:<16} {:>6}\n", "total", total);
  return out;
}

}  // namespace tandem::data
