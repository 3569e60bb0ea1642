#include "optim/cpu/clip_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "optim/cpu/simd_clones.h"
#include "optim/update_math.h"

namespace tandem::optim {

namespace {

// The sum of squares is taken in fixed blocks of kBlock elements, each in 8
// interleaved f64 lanes, then the lanes and the blocks added in order: the
// same bits whatever the thread count, and no serial chain of dependent adds
// (one f64 add per element in a single accumulator is latency-bound: about
// 4x slower than the memory over a 4 M-element embedding gradient).
constexpr int64_t kBlock = 1 << 14;
constexpr int64_t kLanes = 8;

TANDEM_SIMD_CLONES double block_sum_of_squares(const float* x, int64_t n) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(x[i + l]) * x[i + l];
  double tail = 0.0;
  for (; i < n; ++i) tail += static_cast<double>(x[i]) * x[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
}

TANDEM_SIMD_CLONES void scale_range(float* x, int64_t n, float coef) {
  for (int64_t i = 0; i < n; ++i) x[i] *= coef;
}

struct Block {
  float* ptr;
  int64_t numel;
};

}  // namespace

void clip_grad_norm_cpu(const TensorList& grads, double max_norm, float* total_norm) {
  std::vector<Block> blocks;
  for (const TensorListEntry& e : grads)
    for (int64_t at = 0; at < e.numel; at += kBlock) blocks.push_back({e.ptr[0] + at, std::min(kBlock, e.numel - at)});
  std::vector<double> partial(blocks.size());
  parallel_for(0, static_cast<int64_t>(blocks.size()), 4, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b)
      partial[static_cast<size_t>(b)] = block_sum_of_squares(blocks[static_cast<size_t>(b)].ptr, blocks[static_cast<size_t>(b)].numel);
  });
  double sum_sq = 0.0;
  for (double s : partial) sum_sq += s;
  const float norm = static_cast<float>(std::sqrt(sum_sq));
  const float coef = clip_coefficient(norm, max_norm);
  // x * 1 is x: gradients within max_norm (the usual case) are left as they are, without a pass over them.
  if (coef != 1.0f) {
    parallel_for(0, static_cast<int64_t>(blocks.size()), 4, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b)
        scale_range(blocks[static_cast<size_t>(b)].ptr, blocks[static_cast<size_t>(b)].numel, coef);
    });
  }
  *total_norm = norm;
}

}  // namespace tandem::optim
