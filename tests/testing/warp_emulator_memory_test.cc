// The warp emulator's cp.async and ldmatrix (tests/testing/warp_emulator.h)
// against the PTX ISA, on their own.
//
// ldmatrix.sync.aligned.m8n8{.x1,.x2,.x4}{.trans}.shared.b16 ("Warp-level
// matrix load instruction: ldmatrix"): threads 0-7 / 0-15 / 0-31 hold the
// addresses of the rows of matrices 0 / 0-1 / 0-3, thread 8i + r that of row
// r of matrix i. "Each thread in a warp loads fragments of a row, with thread
// 0 receiving the first fragment in register r, and so on. A group of four
// threads loads an entire row": element (row, col) of matrix i lands in
// register i of lane 4 * row + col / 2, in half col % 2 (lower column in the
// low 16 bits). With .trans the matrix is loaded column-major: element
// (row, col) lands in register i of lane 4 * col + row / 2, half row % 2.
// The expectations below are written from that element-to-lane direction;
// the emulator computes the lane-to-element one. A second check feeds the
// fragments to mma.m16n8k16 (whose A and B layouts the emulator takes from
// the ISA's mma fragment figures) and compares the product.
//
// The emulator's schedules, which decide how far apart warps run, are tested
// at the end: skewed warps expose a write that a missing barrier leaves racing.
//
// cp.async.cg.shared.global [dst], [src], 16, src-size ("cp.async"): copies
// src-size bytes and zero-fills the rest of the 16; cp.async.commit_group
// closes the thread's pending copies into a group; cp.async.wait_group N
// waits until at most the N most recent groups are pending. The emulator's
// added promise: a destination reads as 0xff (NaN) bytes until its group is
// waited for.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "tests/testing/warp_emulator.h"

namespace {

// The 16-bit code of element (row, col) of matrix i: distinct for every element.
uint16_t code(int i, int row, int col) { return static_cast<uint16_t>(0x1000 * (i + 1) + 0x100 * row + col); }

// Shared-memory row that holds row r of matrix i: scattered, so only the lanes' addresses say where rows are.
int slot(int i, int r) { return (5 * (8 * i + r) + 3) % 32; }

// Runs ldmatrix with `matrices` matrices on one warp; returns regs[lane][i]. Lanes past 8 * matrices pass
// a null address (PTX reads only the first 8 * matrices).
std::vector<std::array<uint32_t, 4>> load_matrices(int matrices, bool trans) {
  std::vector<std::array<uint32_t, 4>> got(32);
  warp_emulator::launch(1, 1, 32, 32 * 16, [&] {
    auto* rows = reinterpret_cast<uint16_t*>(warp_emulator::shared_memory());
    const int lane = static_cast<int>(threadIdx.x);
    if (lane == 0)
      for (int i = 0; i < 4; ++i)
        for (int r = 0; r < 8; ++r)
          for (int c = 0; c < 8; ++c) rows[8 * slot(i, r) + c] = code(i, r, c);
    __syncthreads();
    const void* row = lane < 8 * matrices ? rows + 8 * slot(lane / 8, lane % 8) : nullptr;
    uint32_t r[4] = {};
    if (matrices == 1) {
      uint32_t (&x)[1] = reinterpret_cast<uint32_t (&)[1]>(r);
      trans ? ldmatrix_x1_trans(x, row) : ldmatrix_x1(x, row);
    } else if (matrices == 2) {
      uint32_t (&x)[2] = reinterpret_cast<uint32_t (&)[2]>(r);
      trans ? ldmatrix_x2_trans(x, row) : ldmatrix_x2(x, row);
    } else {
      trans ? ldmatrix_x4_trans(r, row) : ldmatrix_x4(r, row);
    }
    for (int i = 0; i < 4; ++i) got[lane][i] = r[i];
  });
  return got;
}

// Every element of every loaded matrix is where the ISA puts it, and nothing else is loaded.
void expect_isa_layout(int matrices, bool trans) {
  const auto got = load_matrices(matrices, trans);
  for (int i = 0; i < matrices; ++i)
    for (int row = 0; row < 8; ++row)
      for (int col = 0; col < 8; ++col) {
        const int lane = trans ? 4 * col + row / 2 : 4 * row + col / 2;
        const int half = trans ? row % 2 : col % 2;
        EXPECT_EQ(static_cast<uint16_t>(got[lane][i] >> (16 * half)), code(i, row, col))
            << "x" << matrices << (trans ? ".trans" : "") << ": matrix " << i << ", element (" << row << ", " << col
            << ")";
      }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = matrices; i < 4; ++i) EXPECT_EQ(got[lane][i], 0u) << "register " << i << " is not an output";
}

TEST(WarpEmulatorLdmatrix, X1GivesEachLaneTwoElementsOfARow) { expect_isa_layout(1, false); }
TEST(WarpEmulatorLdmatrix, X2GivesEachLaneTwoElementsOfARowPerMatrix) { expect_isa_layout(2, false); }
TEST(WarpEmulatorLdmatrix, X4GivesEachLaneTwoElementsOfARowPerMatrix) { expect_isa_layout(4, false); }
TEST(WarpEmulatorLdmatrix, X1TransGivesEachLaneTwoElementsOfAColumn) { expect_isa_layout(1, true); }
TEST(WarpEmulatorLdmatrix, X2TransGivesEachLaneTwoElementsOfAColumnPerMatrix) { expect_isa_layout(2, true); }
TEST(WarpEmulatorLdmatrix, X4TransGivesEachLaneTwoElementsOfAColumnPerMatrix) { expect_isa_layout(4, true); }

// C = A . B^T with A (16 x 16) and B (8 x 16, rows = output columns) stored row-major, and C = A . V with V
// (16 x 8) stored row-major, through ldmatrix fragments and mma.m16n8k16: the products of the stored matrices.
TEST(WarpEmulatorLdmatrix, FragmentsFeedMmaAsTheStoredMatrices) {
  // Small integers: exact in f16, and so are the products' sums.
  auto value = [](int r, int c, int salt) { return static_cast<float>((r * 7 + c * 3 + salt) % 9 - 4); };
  constexpr int ld = 24;  // elements per shared row: 48 bytes, 16-byte aligned rows
  float abt[16][8], av[16][8];
  warp_emulator::launch(1, 1, 32, 3 * 16 * ld * 2, [&] {
    auto* a = reinterpret_cast<uint16_t*>(warp_emulator::shared_memory());
    uint16_t* b = a + 16 * ld;  // B [8 x 16]
    uint16_t* v = b + 16 * ld;  // V [16 x 8]
    const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
    if (lane == 0)
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) {
          a[r * ld + c] = tandem::float_to_f16_bits(value(r, c, 0));
          if (r < 8) b[r * ld + c] = tandem::float_to_f16_bits(value(r, c, 1));
          if (c < 8) v[r * ld + c] = tandem::float_to_f16_bits(value(r, c, 2));
        }
    __syncthreads();
    uint32_t af[4], bf[2], vf[2];
    // A: matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15).
    ldmatrix_x4(af, a + (lane % 8 + 8 * (lane / 8 % 2)) * ld + 8 * (lane / 16));
    // B^T: matrices (B rows 0-7, k 0-7), (B rows 0-7, k 8-15).
    ldmatrix_x2(bf, b + (lane % 8) * ld + 8 * (lane / 8 % 2));
    // V: matrices (k 0-7, cols 0-7), (k 8-15, cols 0-7), transposed.
    ldmatrix_x2_trans(vf, v + (lane % 8 + 8 * (lane / 8 % 2)) * ld);
    float c1[4] = {}, c2[4] = {};
    mma16816<tandem::Half>(c1, af, bf);
    mma16816<tandem::Half>(c2, af, vf);
    for (int e = 0; e < 4; ++e) {
      abt[g + 8 * (e / 2)][2 * t + e % 2] = c1[e];
      av[g + 8 * (e / 2)][2 * t + e % 2] = c2[e];
    }
  });
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double want_abt = 0, want_av = 0;
      for (int k = 0; k < 16; ++k) {
        want_abt += double(value(i, k, 0)) * value(j, k, 1);
        want_av += double(value(i, k, 0)) * value(k, j, 2);
      }
      EXPECT_EQ(abt[i][j], want_abt) << "A B^T (" << i << ", " << j << ")";
      EXPECT_EQ(av[i][j], want_av) << "A V (" << i << ", " << j << ")";
    }
}

TEST(WarpEmulatorLdmatrix, RejectsARowAddressThatIsNotA16ByteAlignedSharedRow) {
  for (int offset : {2, 512}) {  // misaligned; past the end of shared memory
    try {
      warp_emulator::launch(1, 1, 32, 512, [&] {
        uint32_t r[4];
        ldmatrix_x4(r, warp_emulator::shared_memory() + (threadIdx.x == 5 ? offset : 16 * threadIdx.x));
      });
      ADD_FAILURE() << "no error for offset " << offset;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("ldmatrix"), std::string::npos) << e.what();
    }
  }
}

alignas(16) const std::array<unsigned char, 48> kSource = [] {
  std::array<unsigned char, 48> s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<unsigned char>(i + 1);
  return s;
}();

TEST(WarpEmulatorCpAsync, CopiesSrcSizeBytesAndZeroFillsTheRestOfTheSixteen) {
  std::array<unsigned char, 48> got{};
  warp_emulator::launch(1, 1, 32, 48, [&] {
    unsigned char* smem = warp_emulator::shared_memory();
    if (threadIdx.x < 3) cp_async_16(smem + 16 * threadIdx.x, kSource.data() + 16 * threadIdx.x, 16 - 7 * threadIdx.x);
    cp_async_commit_group();
    cp_async_wait_group<0>();
    __syncthreads();  // the other threads' copies are visible after their wait and a barrier
    if (threadIdx.x == 31) std::memcpy(got.data(), smem, got.size());
  });
  for (int i = 0; i < 48; ++i) {
    const int piece = i / 16, src_size = 16 - 7 * piece;  // 16, 9, 2 bytes
    EXPECT_EQ(got[i], i % 16 < src_size ? kSource[i] : 0) << "byte " << i;
  }
}

TEST(WarpEmulatorCpAsync, ADestinationReadsAsNanBytesUntilItsGroupIsWaitedFor) {
  std::array<unsigned char, 16> before_commit{}, before_wait{}, after_wait{};
  warp_emulator::launch(1, 1, 32, 16, [&] {
    unsigned char* smem = warp_emulator::shared_memory();
    if (threadIdx.x != 0) return;
    std::memset(smem, 0, 16);  // what was there before the copy
    cp_async_16(smem, kSource.data(), 16);
    std::memcpy(before_commit.data(), smem, 16);
    cp_async_commit_group();
    std::memcpy(before_wait.data(), smem, 16);
    cp_async_wait_group<0>();
    std::memcpy(after_wait.data(), smem, 16);
  });
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(before_commit[i], 0xff) << i;
    EXPECT_EQ(before_wait[i], 0xff) << i;
    EXPECT_EQ(after_wait[i], kSource[i]) << i;
  }
}

TEST(WarpEmulatorCpAsync, WaitGroupNLeavesTheNewestNGroupsInFlight) {
  // Three groups (the third empty, as a pipeline's last prefetch may be); wait_group 2, 1, 0.
  std::vector<std::array<unsigned char, 32>> seen;
  warp_emulator::launch(1, 1, 32, 32, [&] {
    unsigned char* smem = warp_emulator::shared_memory();
    if (threadIdx.x != 0) return;
    auto look = [&] {
      seen.emplace_back();
      std::memcpy(seen.back().data(), smem, 32);
    };
    cp_async_16(smem, kSource.data(), 16);
    cp_async_commit_group();
    cp_async_16(smem + 16, kSource.data() + 16, 16);
    cp_async_commit_group();
    cp_async_commit_group();
    cp_async_wait_group<2>();
    look();
    cp_async_wait_group<1>();
    look();
    cp_async_wait_group<0>();
    look();
  });
  ASSERT_EQ(seen.size(), 3u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(seen[0][i], kSource[i]) << "group 1 after wait_group 2, byte " << i;
    EXPECT_EQ(seen[0][16 + i], 0xff) << "group 2 after wait_group 2, byte " << i;
    EXPECT_EQ(seen[1][16 + i], kSource[16 + i]) << "group 2 after wait_group 1, byte " << i;
    EXPECT_EQ(seen[2][16 + i], kSource[16 + i]) << "group 2 after wait_group 0, byte " << i;
  }
}

TEST(WarpEmulatorCpAsync, WaitGroupCompletesOnlyTheWaitingThreadsCopies) {
  // Thread 1 copies and never waits: the other threads' waits and a barrier do not make its bytes land.
  std::array<unsigned char, 16> got{};
  warp_emulator::launch(1, 1, 32, 16, [&] {
    unsigned char* smem = warp_emulator::shared_memory();
    if (threadIdx.x == 1) {
      cp_async_16(smem, kSource.data(), 16);
      cp_async_commit_group();
    } else {
      cp_async_wait_group<0>();
    }
    __syncthreads();
    if (threadIdx.x == 0) std::memcpy(got.data(), smem, 16);
  });
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], 0xff) << "byte " << i;
}

TEST(WarpEmulatorCpAsync, RejectsAMisalignedSourceOrADestinationOutsideSharedMemory) {
  struct Bad {
    int dst_offset;
    const unsigned char* src;
    int src_size;
  };
  const Bad cases[] = {{8, kSource.data(), 16}, {32, kSource.data(), 16}, {0, kSource.data() + 4, 16},
                       {0, kSource.data(), 17}};
  for (const Bad& bad : cases) {
    try {
      warp_emulator::launch(1, 1, 32, 32, [&] {
        if (threadIdx.x == 0) cp_async_16(warp_emulator::shared_memory() + bad.dst_offset, bad.src, bad.src_size);
      });
      ADD_FAILURE() << "no error for destination offset " << bad.dst_offset << ", src-size " << bad.src_size;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("cp.async"), std::string::npos) << e.what();
    }
  }
}

// Which warp's thread 0 logged first, at three warp collectives and after a __syncthreads (10 + warp).
std::vector<int> warp_order(warp_emulator::Schedule schedule) {
  std::vector<int> order;
  warp_emulator::launch(
      1, 1, 64, 0,
      [&] {
        const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
        for (int k = 0; k < 3; ++k) {
          if (lane == 0) order.push_back(warp);
          __shfl_sync(0xffffffffu, 1.0f, 0);
        }
        __syncthreads();
        if (lane == 0) order.push_back(10 + warp);
      },
      schedule);
  return order;
}

TEST(WarpEmulatorSchedule, RoundRobinAdvancesTheWarpsTogether) {
  const std::vector<int> order = warp_order(warp_emulator::Schedule::RoundRobin);
  ASSERT_EQ(order.size(), 8u);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 1);
}

// Each warp runs to the __syncthreads before the next starts; the last to arrive opens it and runs on.
TEST(WarpEmulatorSchedule, WarpByWarpRunsEachWarpToTheBlockBarrierInTurn) {
  EXPECT_EQ(warp_order(warp_emulator::Schedule::WarpByWarp), (std::vector<int>{0, 0, 0, 1, 1, 1, 11, 10}));
  EXPECT_EQ(warp_order(warp_emulator::Schedule::WarpByWarpReversed), (std::vector<int>{1, 1, 1, 0, 0, 0, 10, 11}));
}

// Warp 0 reads a shared word after a few collectives; warp 1 overwrites it, with or without a
// __syncthreads after warp 0's read. Returns what warp 0 read.
int racy_read(warp_emulator::Schedule schedule, bool barrier) {
  int seen = -1;
  warp_emulator::launch(
      1, 1, 64, 16,
      [&] {
        int* word = reinterpret_cast<int*>(warp_emulator::shared_memory());
        if (threadIdx.x == 0) *word = 1;
        __syncthreads();
        if (threadIdx.x < 32) {
          for (int k = 0; k < 3; ++k) __shfl_sync(0xffffffffu, 1.0f, 0);
          if (threadIdx.x == 0) seen = *word;
        }
        if (barrier) __syncthreads();
        if (threadIdx.x == 32) *word = 2;
      },
      schedule);
  return seen;
}

TEST(WarpEmulatorSchedule, SkewedWarpsExposeAWriteThatAMissingBarrierLeavesRacing) {
  using warp_emulator::Schedule;
  EXPECT_EQ(racy_read(Schedule::WarpByWarp, false), 2);  // warp 1 opens the first barrier and writes at once
  EXPECT_EQ(racy_read(Schedule::WarpByWarpReversed, false), 1);  // warp 0 opens it and reads first
  for (Schedule s : {Schedule::RoundRobin, Schedule::WarpByWarp, Schedule::WarpByWarpReversed})
    EXPECT_EQ(racy_read(s, true), 1) << static_cast<int>(s);
}

}  // namespace
