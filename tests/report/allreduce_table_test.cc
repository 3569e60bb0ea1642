// Reading `tandem bench allreduce` tables (report/allreduce_table.h).
#include "report/allreduce_table.h"

#include <gtest/gtest.h>

#include "tests/testing/errors.h"

namespace tandem::report {
namespace {

using tandem::testing::throws_error_containing;

const char* kTable =
    "# tandem bench allreduce: backend ring, 3 ranks, dtype float, op sum, device cpu, iters 20, warmup 5\n"
    "#\n"
    "#                                                   out-of-place                            in-place\n"
    "#       size         count      type   redop    root        time   algbw   busbw  #wrong        time   algbw   "
    "busbw  #wrong\n"
    "#        (B)    (elements)                                  (us)  (GB/s)  (GB/s)                (us)  (GB/s)  "
    "(GB/s)\n"
    "        1024           256     float     sum      -1       41.50    0.02    0.03       0       40.25    0.03    "
    "0.03       0\n"
    "[rank 0]         4096          1024     float     sum      -1       60.00    0.07    0.09       0       "
    "58.00    0.07    0.09       0\n"
    "# Out of bounds values : 0 OK\n"
    "# Avg bus bandwidth    : 0.06\n";

TEST(AllreduceTable, ReadsRowsAndTheWorldSizeFromTheHeader) {
  const AllreduceTable t = parse_allreduce_table(kTable, "t.txt");
  EXPECT_EQ(t.world_size, 3);
  EXPECT_EQ(t.backend, "ring");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].bytes, 1024);
  EXPECT_EQ(t.rows[0].out_of_place_us, 41.5);
  EXPECT_EQ(t.rows[0].in_place_us, 40.25);
  EXPECT_EQ(t.rows[0].line, 6);
  EXPECT_EQ(t.rows[1].bytes, 4096) << "a launcher's [rank N] prefix is skipped";
  EXPECT_EQ(t.rows[1].in_place_us, 58);
}

TEST(AllreduceTable, ReadsTheHeaderThatNamesTheCollectiveAndTransport) {
  std::string table = kTable;
  table.replace(0, table.find('\n'),
                "# tandem bench allreduce: all_reduce, backend ring (transport shm), 4 ranks, dtype float, op sum");
  const AllreduceTable t = parse_allreduce_table(table, "t.txt");
  EXPECT_EQ(t.world_size, 4);
  EXPECT_EQ(t.backend, "ring");
}

TEST(AllreduceTable, ReadsTheHeaderThatAlsoSaysWhetherSingleCopyIsOn) {
  for (const char* note : {"from 1048576 bytes", "off: rank 0 cannot read the memory of rank 1: process_vm_readv from "
                                                 "pid 42: Operation not permitted (EPERM)"}) {
    std::string table = kTable;
    table.replace(0, table.find('\n'), std::string("# tandem bench allreduce: all_reduce, backend ring (transport shm) "
                                                   "(single copy ") + note + "), 2 ranks, dtype float, op sum");
    const AllreduceTable t = parse_allreduce_table(table, "t.txt");
    EXPECT_EQ(t.world_size, 2) << note;
    EXPECT_EQ(t.backend, "ring") << note;
  }
}

TEST(AllreduceTable, AnotherCollectivesTableIsRefused) {
  std::string table = kTable;
  table.replace(0, table.find('\n'), "# tandem bench allreduce: reduce_scatter, backend ring, 4 ranks, dtype float");
  EXPECT_TRUE(throws_error_containing([&] { parse_allreduce_table(table, "rs.txt"); },
                                      "rs.txt:1: a reduce_scatter table"));
}

TEST(AllreduceTable, AGivenWorldSizeMustAgreeWithTheHeader) {
  EXPECT_EQ(parse_allreduce_table(kTable, "t.txt", 3).world_size, 3);
  EXPECT_TRUE(throws_error_containing([] { parse_allreduce_table(kTable, "t.txt", 4); },
                                      "t.txt: given as 4 ranks, but its header says 3"));
  const std::string headless = "1024 256 float sum -1 41.5 0.02 0.03 0 40.25 0.03 0.03 0\n";
  EXPECT_EQ(parse_allreduce_table(headless, "h.txt", 2).world_size, 2);
  EXPECT_TRUE(throws_error_containing([&] { parse_allreduce_table(headless, "h.txt"); }, "h.txt: no '# tandem"));
}

TEST(AllreduceTable, MalformedLinesAreNamedByFileAndLine) {
  EXPECT_TRUE(throws_error_containing([] { parse_allreduce_table("# x\n1024 256 float sum\n", "bad.txt", 2); },
                                      "bad.txt:2: expected 13 columns"));
  EXPECT_TRUE(throws_error_containing(
      [] { parse_allreduce_table("1024 256 float sum -1 fast 0.02 0.03 0 40 0.03 0.03 0\n", "bad.txt", 2); },
      "bad.txt:1: size and times must be numbers"));
  EXPECT_TRUE(throws_error_containing(
      [] { parse_allreduce_table("1024 256 float sum -1 41 0.02 0.03 3 40 0.03 0.03 0\n", "bad.txt", 2); },
      "bad.txt:1: the run reported wrong results"));
  EXPECT_TRUE(throws_error_containing([] { parse_allreduce_table("# only comments\n", "empty.txt", 2); },
                                      "empty.txt: no table rows"));
}

TEST(AllreduceTable, AMissingFileIsNamed) {
  EXPECT_TRUE(throws_error_containing([] { read_allreduce_table("/nonexistent/ar.txt"); },
                                      "cannot read all_reduce table /nonexistent/ar.txt"));
}

}  // namespace
}  // namespace tandem::report
