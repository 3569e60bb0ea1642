#include "data/imdb.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "data/text_file.h"

namespace tandem::data {

namespace {

std::vector<std::filesystem::path> review_files(const std::filesystem::path& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec))
    throw_input_error(folder.string(), "no such folder (expected the aclImdb layout <root>/train|test/pos|neg/*.txt)");
  std::vector<std::filesystem::path> files;
  std::filesystem::directory_iterator it(folder, ec);
  if (ec) throw_input_error(folder.string(), fmt::format("cannot list the folder: {}", ec.message()));
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) throw_input_error(folder.string(), fmt::format("cannot list the folder: {}", ec.message()));
    if (it->path().extension() != ".txt") continue;
    // Reading a FIFO that nobody writes to would block for ever.
    const auto status = it->status(ec);
    if (!ec && !std::filesystem::is_regular_file(status) && !std::filesystem::is_directory(status))
      throw_input_error(it->path().string(), "is not a regular file (a FIFO, socket or device)");
    files.push_back(it->path());
  }
  if (files.empty()) throw_input_error(folder.string(), "no .txt review files");
  std::sort(files.begin(), files.end());
  return files;
}

// The HTML line breaks of the reviews become spaces.
std::string without_line_breaks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, 6) == "<br />") {
      out.push_back(' ');
      i += 6;
    } else if (text.substr(i, 5) == "<br/>") {
      out.push_back(' ');
      i += 5;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace

Dataset read_imdb(const std::filesystem::path& root, std::string_view split) {
  if (split != "train" && split != "test")
    throw_input_error(root.string(), fmt::format("IMDB split must be 'train' or 'test', got '{}'", split));
  Dataset dataset;
  dataset.class_names = {"neg", "pos"};
  for (int32_t label = 0; label < 2; ++label) {
    for (const auto& file : review_files(root / split / dataset.class_names[static_cast<size_t>(label)])) {
      std::string text = without_line_breaks(read_text_file(file));
      std::string_view body = trim(text);
      if (body.empty()) throw_input_error(location(file, 1), "empty review");
      dataset.examples.push_back({std::string(body), label, location(file, 1)});
    }
  }
  return dataset;
}

}  // namespace tandem::data
