// The Large Movie Review Dataset (aclImdb) folder layout:
// <root>/<split>/neg/*.txt and <root>/<split>/pos/*.txt, one review per file.
//
// Labels: neg = 0, pos = 1. Files are read in file-name order (neg first), so
// the dataset order is the same on every machine. The HTML line breaks the
// reviews contain ("<br />") become spaces. Other folders (unsup/) and files
// not ending in .txt are ignored.
#pragma once

#include <filesystem>
#include <string_view>

#include "data/dataset.h"

namespace tandem::data {

// `split` is "train" or "test". Throws an input error naming the path for a
// missing folder, a folder without .txt files, an unreadable or empty review,
// or invalid UTF-8 (with line and byte offset).
Dataset read_imdb(const std::filesystem::path& root, std::string_view split);

}  // namespace tandem::data
