#include "data/imdb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::StartsWith;
using testing::TempDir;

void write_small_imdb(const TempDir& dir) {
  dir.write("aclImdb/train/neg/10_2.txt", "Dull.<br /><br />Avoid.");
  dir.write("aclImdb/train/neg/3_1.txt", "Terrible acting.");
  dir.write("aclImdb/train/pos/0_9.txt", "A joy from start to finish.");
  dir.write("aclImdb/train/urls_pos.txt", "http://example.com\n");  // not a review folder
  dir.write("aclImdb/train/unsup/0_0.txt", "ignored");
}

TEST(Imdb, ReadsNegThenPosInFileNameOrder) {
  TempDir dir;
  write_small_imdb(dir);
  Dataset d = read_imdb(dir.path() / "aclImdb", "train");
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"neg", "pos"}));
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.examples[0].label, 0);
  EXPECT_EQ(d.examples[0].source, (dir.path() / "aclImdb/train/neg/10_2.txt").string() + ":1");
  EXPECT_EQ(d.examples[1].text, "Terrible acting.");
  EXPECT_EQ(d.examples[2].label, 1);
  EXPECT_EQ(d.examples[2].text, "A joy from start to finish.");
}

TEST(Imdb, HtmlLineBreaksBecomeSpaces) {
  TempDir dir;
  write_small_imdb(dir);
  Dataset d = read_imdb(dir.path() / "aclImdb", "train");
  EXPECT_EQ(d.examples[0].text, "Dull.  Avoid.");
}

TEST(Imdb, MissingLabelFolderIsAnErrorNamingIt) {
  TempDir dir;
  dir.write("aclImdb/test/neg/1_1.txt", "bad");
  auto pos = dir.path() / "aclImdb/test/pos";
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "aclImdb", "test"); }),
              StartsWith(pos.string() + ": no such folder"));
}

TEST(Imdb, MissingRootIsAnError) {
  TempDir dir;
  auto neg = dir.path() / "nowhere/train/neg";
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "nowhere", "train"); }),
              StartsWith(neg.string() + ": no such folder"));
}

TEST(Imdb, UnknownSplitIsAnError) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { read_imdb(dir.path(), "validation"); }),
              StartsWith(dir.path().string() + ": IMDB split must be 'train' or 'test'"));
}

TEST(Imdb, FolderWithoutReviewsIsAnError) {
  TempDir dir;
  dir.write("aclImdb/train/neg/1_1.txt", "bad");
  std::filesystem::create_directories(dir.path() / "aclImdb/train/pos");
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "aclImdb", "train"); }),
              StartsWith((dir.path() / "aclImdb/train/pos").string() + ": no .txt review files"));
}

TEST(Imdb, UnreadableReviewIsAnErrorNamingThePath) {
  TempDir dir;
  write_small_imdb(dir);
  auto odd = dir.path() / "aclImdb/train/pos/5_8.txt";
  std::filesystem::create_directories(odd);  // a folder where a review file should be
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "aclImdb", "train"); }),
              StartsWith(odd.string() + ": is a directory"));
}

TEST(Imdb, AFifoWhereAReviewShouldBeIsAnErrorNotAHang) {
  TempDir dir;
  write_small_imdb(dir);
  auto fifo = dir.path() / "aclImdb/train/pos/9_9.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "aclImdb", "train"); }),
              StartsWith(fifo.string() + ": is not a regular file (a FIFO, socket or device)"));
}

TEST(Imdb, EmptyReviewIsAnError) {
  TempDir dir;
  write_small_imdb(dir);
  auto empty = dir.write("aclImdb/train/pos/7_7.txt", " <br /> \n");
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "aclImdb", "train"); }),
              StartsWith(empty.string() + ":1: empty review"));
}

TEST(Imdb, InvalidUtf8NamesFileLineAndOffset) {
  TempDir dir;
  write_small_imdb(dir);
  auto bad = dir.write("aclImdb/train/pos/8_10.txt", "Great\nfilm \xFF!");
  EXPECT_THAT(error_of([&] { read_imdb(dir.path() / "aclImdb", "train"); }),
              StartsWith(bad.string() + ":2: invalid UTF-8 at byte offset 11"));
}

}  // namespace
}  // namespace tandem::data
