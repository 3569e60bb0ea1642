#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_atomic_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  size_t files() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

TEST_F(AtomicFile, WritesTheBytesExactly) {
  const std::string bytes("a\0b\n", 4);
  write_file_atomically(dir_ / "f", bytes);
  EXPECT_EQ(read(dir_ / "f"), bytes);
  EXPECT_EQ(files(), 1u);  // no temporary file left
}

TEST_F(AtomicFile, ReplacesAnExistingFile) {
  write_file_atomically(dir_ / "f", std::string("old content"));
  write_file_atomically(dir_ / "f", std::string("new"));
  EXPECT_EQ(read(dir_ / "f"), "new");
}

TEST_F(AtomicFile, AMissingFolderIsAnErrorNamingThePath) {
  const fs::path target = dir_ / "no_such_folder" / "f";
  try {
    write_file_atomically(target, std::string("x"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(files(), 0u);
}

TEST_F(AtomicFile, AWriterThatFailsLeavesTheOldFileAndNoTemporaryFile) {
  write_file_atomically(dir_ / "f", std::string("old"));
  EXPECT_THROW(write_file_atomically(dir_ / "f",
                                     [](std::ostream& out) {
                                       out << "half of the new";
                                       TANDEM_FAIL("the writer failed");
                                     }),
               Error);
  EXPECT_EQ(read(dir_ / "f"), "old");
  EXPECT_EQ(files(), 1u);
}

}  // namespace
}  // namespace tandem
