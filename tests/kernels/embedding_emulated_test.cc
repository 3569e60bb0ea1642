// The token-embedding gradient's window walk (kernels/cuda/embedding_kernels.cuh,
// TANDEM_EMBEDDING_BACKWARD=windows) run on the CPU under tests/testing/warp_emulator.h, with the
// grids and blocks embedding.cu launches, on (key, row) pairs sorted as cub's stable radix sort
// sorts them. Against the CPU op (kernels/cpu/embedding_cpu.cc): the same bits for every id whose
// occurrences fall in one window (both add in position order from zero), a rounding of the double
// sums for the rest; every present id's row written, no other; the same bits whichever warp runs
// ahead.
#include <gtest/gtest.h>

#include "tests/testing/warp_emulator.h"  // first: CUDA keywords and built-ins for the device code

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/embedding_cpu.h"
#include "kernels/cuda/embedding_kernels.cuh"
#include "tests/testing/element_values.h"

namespace tandem::kernels {
namespace {

using testing::as_double;
using testing::as_element;
using testing::bit_patterns;
using testing::spread_values;

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, BFloat16>) return DType::BF16;
  else if constexpr (std::is_same_v<T, Half>) return DType::F16;
  else return DType::F32;
}

struct Shape {
  int64_t n, dim, vocab;
};

// The ids' sort keys (an out-of-range id becomes vocab) and positions, sorted by key, stable: what
// embedding.cu's sort_keys_kernel and cub::DeviceRadixSort::SortPairs give the walk.
struct Sorted {
  std::vector<uint32_t> keys;
  std::vector<int32_t> rows;
};

Sorted sorted_pairs(const std::vector<int64_t>& ids, int64_t vocab) {
  Sorted s;
  std::vector<int32_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) {
    const int64_t id = ids[static_cast<size_t>(i)];
    return static_cast<uint32_t>(id >= 0 && id < vocab ? id : vocab);
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
  for (int32_t i : order) {
    s.keys.push_back(key(i));
    s.rows.push_back(i);
  }
  return s;
}

// dtok after both passes at vector width V, launched as embedding.cu launches them (pass 2 at width 4
// where dim allows). dtok and the slots start as NaN: a row or slot the walk should write and does
// not, or reads before writing, shows.
template <class T, int V>
std::vector<T> window_walk(const std::vector<T>& dout, const std::vector<int64_t>& ids, Shape s,
                           warp_emulator::Schedule schedule = warp_emulator::Schedule::RoundRobin) {
  const Sorted sorted = sorted_pairs(ids, s.vocab);
  const int64_t windows = embedding_windows(s.n);
  std::vector<T> dtok(static_cast<size_t>(s.vocab * s.dim), as_element<T>(std::nanf("")));
  std::vector<float> head(static_cast<size_t>(windows * s.dim), std::nanf(""));
  std::vector<float> tail(head);
  const EmbeddingWindowLaunch l = embedding_window_launch(s.n, s.dim / V);
  warp_emulator::launch(
      l.grid.x, l.grid.y, warp_emulator::Dim3{l.block.x, l.block.y, 1}, 0,
      [&] {
        window_kernel<T, V>(dout.data(), sorted.keys.data(), sorted.rows.data(), dtok.data(), head.data(),
                            tail.data(), s.n, s.dim, static_cast<uint32_t>(s.vocab));
      },
      schedule);
  auto combine = [&]<int CV>() {
    const EmbeddingWindowLaunch c = embedding_window_launch(s.n, s.dim / CV);
    warp_emulator::launch(
        c.combine_grid.x, 1, warp_emulator::Dim3{c.combine_block.x, c.combine_block.y, 1},
        kCombineLanes * kCombineColumns * CV * sizeof(float),
        [&] {
          window_combine_kernel<T, CV>(sorted.keys.data(), head.data(), tail.data(), dtok.data(), s.n, s.dim,
                                       static_cast<uint32_t>(s.vocab));
        },
        schedule);
  };
  if (s.dim % 4 == 0) combine.template operator()<4>();
  else combine.template operator()<1>();
  return dtok;
}

// The CPU op's token gradient (one sequence of n positions). The CPU kernel takes checked ids (the
// op throws on a bad one first), so an out-of-range id is given an extra row here, which is dropped.
template <class T>
std::vector<T> cpu_gradient(const std::vector<T>& dout, std::vector<int64_t> ids, Shape s) {
  for (int64_t& id : ids)
    if (id < 0 || id >= s.vocab) id = s.vocab;
  std::vector<T> dtok(static_cast<size_t>((s.vocab + 1) * s.dim));
  embedding_backward_cpu(dout.data(), ids.data(), DType::I64, dtok.data(), nullptr, 1, s.n, s.dim, s.vocab + 1, s.n,
                         dtype_of<T>());
  dtok.resize(static_cast<size_t>(s.vocab * s.dim));
  return dtok;
}

// n ids: position i < padded is id 0 (a padding id), the rest uniform over [0, vocab) from `seed`,
// and every 97th position from the end an out-of-range id when `bad`.
std::vector<int64_t> make_ids(int64_t n, int64_t vocab, int64_t padded, bool bad, uint64_t seed) {
  std::vector<int64_t> ids;
  uint64_t x = seed;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(i < padded ? 0 : static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(vocab)));
  }
  if (bad)
    for (int64_t i = n - 1; i >= padded; i -= 97) ids[static_cast<size_t>(i)] = i % 2 ? vocab + i : -1 - i;
  return ids;
}

// Whether id's occurrences, sorted, all fall in one window of 32.
std::vector<bool> in_one_window(const std::vector<int64_t>& ids, int64_t vocab) {
  const Sorted s = sorted_pairs(ids, vocab);
  std::vector<int64_t> first(static_cast<size_t>(vocab), -1), last(static_cast<size_t>(vocab), -1);
  for (size_t i = 0; i < s.keys.size(); ++i) {
    if (s.keys[i] == static_cast<uint32_t>(vocab)) continue;
    if (first[s.keys[i]] < 0) first[s.keys[i]] = static_cast<int64_t>(i);
    last[s.keys[i]] = static_cast<int64_t>(i);
  }
  std::vector<bool> one(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v)
    one[static_cast<size_t>(v)] = first[v] >= 0 && first[v] / kEmbeddingWindow == last[v] / kEmbeddingWindow;
  return one;
}

std::vector<bool> present(const std::vector<int64_t>& ids, int64_t vocab) {
  std::vector<bool> p(static_cast<size_t>(vocab));
  for (int64_t id : ids)
    if (id >= 0 && id < vocab) p[static_cast<size_t>(id)] = true;
  return p;
}

// 4096 x 256 of 30522 ids: most ids once or twice, many windows of many pieces, one column chunk
// at 16-bit 8-vectors, two at f32 4-vectors, eight at width 1; with 3500 of them padding (a segment over
// 110 windows: 13 or 14 heads per combine lane); 1000 x 100 of 7 ids (long segments, no whole 16-byte
// vectors); 200 x 33 of 50 with out-of-range ids (scalar combine); 31 x 8 (one partial window); 70 x
// 768 of 3 ids (segments over three windows, 3 to 24 column chunks).
struct Case {
  Shape shape;
  int64_t padded;
  bool bad;
};
const Case kCases[] = {{{4096, 256, 30522}, 0, false}, {{4096, 256, 30522}, 3500, false},
                       {{1000, 100, 7}, 0, false},     {{200, 33, 50}, 20, true},
                       {{31, 8, 5}, 0, false},         {{70, 768, 3}, 0, true}};

template <class T, int V>
void expect_the_cpu_values(const Case& c) {
  const Shape s = c.shape;
  SCOPED_TRACE(std::to_string(s.n) + " ids of " + std::to_string(s.dim) + ", vocabulary " + std::to_string(s.vocab) +
               ", " + std::to_string(c.padded) + " padded, width " + std::to_string(V));
  const std::vector<int64_t> ids = make_ids(s.n, s.vocab, c.padded, c.bad, static_cast<uint64_t>(s.dim));
  const std::vector<T> dout = spread_values<T>(s.n * s.dim, static_cast<uint32_t>(s.vocab));
  const std::vector<T> got = window_walk<T, V>(dout, ids, s);
  const std::vector<T> cpu = cpu_gradient(dout, ids, s);
  const std::vector<bool> one = in_one_window(ids, s.vocab), seen = present(ids, s.vocab);
  const double ulp = std::is_same_v<T, BFloat16> ? 0x1p-8 : std::is_same_v<T, Half> ? 0x1p-11 : 0x1p-24;
  int checked_bits = 0, checked_close = 0;
  for (int64_t v = 0; v < s.vocab; ++v) {
    for (int64_t d = 0; d < s.dim; ++d) {
      const size_t i = static_cast<size_t>(v * s.dim + d);
      if (!seen[static_cast<size_t>(v)]) {
        ASSERT_TRUE(std::isnan(as_double(got[i]))) << "id " << v << " is absent, yet its row was written";
        continue;
      }
      if (one[static_cast<size_t>(v)]) {
        ASSERT_EQ(bit_patterns(std::vector<T>{got[i]}), bit_patterns(std::vector<T>{cpu[i]}))
            << "id " << v << " (one window), column " << d << ": " << as_double(got[i]) << " against "
            << as_double(cpu[i]);
        ++checked_bits;
      } else {
        double exact = 0, scale = 0;
        for (int64_t r = 0; r < s.n; ++r)
          if (ids[static_cast<size_t>(r)] == v) {
            exact += as_double(dout[static_cast<size_t>(r * s.dim + d)]);
            scale += std::fabs(as_double(dout[static_cast<size_t>(r * s.dim + d)]));
          }
        // f32 sums at most 65 deep (a piece of 32, a lane's heads, the lanes), each rounding off by at
        // most 2^-24 of the sum of magnitudes, then one rounding to T (and f16's subnormal spacing).
        const double f32_error = 65 * 0x1p-24 * scale;
        ASSERT_LE(std::fabs(as_double(got[i]) - exact), ulp * (std::fabs(exact) + f32_error) + f32_error + 0x1p-24)
            << "id " << v << " (several windows), column " << d;
        ++checked_close;
      }
    }
  }
  EXPECT_GT(checked_bits + checked_close, 0);
}

template <class T>
void expect_the_cpu_values_at_both_widths() {
  constexpr int VV = 16 / sizeof(T);
  for (const Case& c : kCases) {
    expect_the_cpu_values<T, 1>(c);
    if (c.shape.dim % VV == 0) expect_the_cpu_values<T, VV>(c);
  }
}

TEST(EmulatedEmbeddingWindows, GiveTheCpuBitsInOneWindowAndItsSumsToARoundingAcrossWindowsInF32) {
  expect_the_cpu_values_at_both_widths<float>();
}

TEST(EmulatedEmbeddingWindows, GiveTheCpuBitsInOneWindowAndItsSumsToARoundingAcrossWindowsInBf16) {
  expect_the_cpu_values_at_both_widths<BFloat16>();
}

TEST(EmulatedEmbeddingWindows, GiveTheCpuBitsInOneWindowAndItsSumsToARoundingAcrossWindowsInF16) {
  expect_the_cpu_values_at_both_widths<Half>();
}

// The cases above hold both kinds of id: most in one window, and segments over several (so the
// combine pass ran, and so did its loop of 8 heads in flight per lane: 3500 padding positions are
// 110 windows, 13 or 14 heads per lane).
TEST(EmulatedEmbeddingWindows, TheCasesHoldIdsInOneWindowAndIdsOverManyWindows) {
  const Case& c = kCases[1];
  const std::vector<int64_t> ids = make_ids(c.shape.n, c.shape.vocab, c.padded, c.bad, 256);
  const std::vector<bool> one = in_one_window(ids, c.shape.vocab), seen = present(ids, c.shape.vocab);
  int64_t many = 0, single = 0;
  for (int64_t v = 0; v < c.shape.vocab; ++v) {
    if (!seen[static_cast<size_t>(v)]) continue;
    (one[static_cast<size_t>(v)] ? single : many) += 1;
  }
  EXPECT_GE(many, 1);
  EXPECT_GT(single, 500);
  EXPECT_GT(c.padded / kEmbeddingWindow, kCombineInFlight * kCombineLanes);
}

// The pass-1 warps and the pass-2 lanes meet only in memory they do not share within a launch, and
// the combine's lanes through shared memory behind a barrier: the same bits whichever warp runs ahead.
TEST(EmulatedEmbeddingWindows, GiveTheSameBitsWhicheverWarpRunsAhead) {
  const Shape s{4096, 256, 30522};
  const std::vector<int64_t> ids = make_ids(s.n, s.vocab, 3500, false, 5);
  const std::vector<BFloat16> dout = spread_values<BFloat16>(s.n * s.dim, 9);
  const auto round_robin = bit_patterns(window_walk<BFloat16, 8>(dout, ids, s));
  for (auto schedule : {warp_emulator::Schedule::WarpByWarp, warp_emulator::Schedule::WarpByWarpReversed})
    EXPECT_EQ(bit_patterns(window_walk<BFloat16, 8>(dout, ids, s, schedule)), round_robin);
}

// A segment over several windows adds its pieces in the documented order: tail (the first window's
// piece, position order), then lane l's heads l, l + 8, ... in order, lanes 0..7 in order. Id 0
// fills positions 0..2999 (94 windows: the tail is window 0, heads are windows 1..93, 11 or 12 per
// lane: one pass of the 8-in-flight loop, then the rest one at a time).
TEST(EmulatedEmbeddingWindows, ALongSegmentAddsTailThenEachLanesHeadsInOrder) {
  const Shape s{3000, 4, 2};
  const std::vector<int64_t> ids(static_cast<size_t>(s.n), 0);
  const std::vector<float> dout = spread_values<float>(s.n * s.dim, 11);
  const std::vector<float> got = window_walk<float, 4>(dout, ids, s);
  const int64_t windows = embedding_windows(s.n);
  ASSERT_EQ(windows, 94);
  for (int64_t d = 0; d < s.dim; ++d) {
    auto piece = [&](int64_t w) {
      float p = 0.0f;
      for (int64_t r = w * kEmbeddingWindow; r < std::min((w + 1) * kEmbeddingWindow, s.n); ++r)
        p += dout[static_cast<size_t>(r * s.dim + d)];
      return p;
    };
    float lanes[kCombineLanes] = {};
    for (int64_t w = 1; w < windows; ++w) lanes[(w - 1) % kCombineLanes] += piece(w);
    float want = piece(0);
    for (float l : lanes) want += l;
    EXPECT_EQ(got[static_cast<size_t>(d)], want) << "column " << d;
    EXPECT_TRUE(std::isnan(got[static_cast<size_t>(s.dim + d)])) << "id 1 is absent";
  }
}

}  // namespace
}  // namespace tandem::kernels
