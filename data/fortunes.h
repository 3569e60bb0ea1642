// The fortune cookie databases of the Debian `fortunes` and `fortunes-min`
// packages as a text-classification data set: the category is the label.
//
// A category is a text file in the fortunes folder (kDefaultFortunesDir)
// whose entries are separated by lines holding only "%". Index files (*.dat),
// the *.u8 symlinks, any other symlink, hidden files and subfolders (notably
// off/, the offensive set) are not categories. Empty entries (two "%" lines in
// a row, a trailing "%") are skipped, as strfile(1) does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem::data {

// Where the packages put them: /usr/share/games/fortunes, unless the build was
// configured with another TANDEM_FORTUNES_DIR (an offline build's bundle).
inline const std::filesystem::path kDefaultFortunesDir = TANDEM_FORTUNES_DIR;

// The demo's categories: distinct topics with 147..1051 entries each (2326 in all).
// A bag-of-words naive Bayes reaches about 77% on a 10% test split against a
// 45% majority-class baseline, so the task is learnable but not trivial.
std::vector<std::string> default_fortune_categories();

struct FortuneEntry {
  std::string text;  // the entry without its surrounding blank space
  int64_t line = 0;  // the line it starts on
};

// The entries of one fortune file. Throws an input error for a missing file or invalid UTF-8.
std::vector<FortuneEntry> read_fortune_file(const std::filesystem::path& path);

struct FortuneCategory {
  std::string name;
  std::filesystem::path path;
  int64_t entries = 0;
};

// Every category in `dir`, sorted by name, with its number of entries.
std::vector<FortuneCategory> list_fortune_categories(const std::filesystem::path& dir = kDefaultFortunesDir);

// The entries of `categories` (label = position in the list; class names = the
// category names). Throws an input error naming the folder for a missing folder
// (with a hint to install the package), an unknown or repeated category (listing the
// available ones) and a category without entries.
Dataset read_fortunes(const std::vector<std::string>& categories,
                      const std::filesystem::path& dir = kDefaultFortunesDir);

// A table of the categories in `dir` with their counts, for the CLI.
std::string describe_fortune_categories(const std::filesystem::path& dir = kDefaultFortunesDir);

}  // namespace tandem::data
