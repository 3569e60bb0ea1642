// TF-IDF weights on the GPU (kernels/tfidf_weights.h): one block of 256
// threads per row. Each thread computes v = tf(mask) * idf[id] at positions
// tid, tid + 256, ... and writes it, the squares are summed per warp by
// shuffles and the 8 warp sums added in warp order (deterministic), then every
// thread scales its positions by 1 / norm. Traffic: ids and mask read once,
// one gathered idf entry per real token, w written twice; a negligible kernel
// next to the embedding it weights. Numerics: f32 throughout, logf for the
// sublinear tf.
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/cuda/tfidf_weights_cuda.h"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;

template <class Id>
__global__ void __launch_bounds__(kThreads) tfidf_weights_kernel(const Id* __restrict__ ids, const uint8_t* __restrict__ mask,
                                                          const float* __restrict__ idf, int64_t vocab,
                                                          float* __restrict__ w, int64_t seq, bool sublinear_tf) {
  __shared__ float warp_squares[kThreads / 32];
  __shared__ float scale;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * seq;
  float squares = 0.0f;
  for (int64_t s = threadIdx.x; s < seq; s += kThreads) {
    const uint8_t m = mask[row + s];
    const int64_t id = static_cast<int64_t>(ids[row + s]);
    float v = 0.0f;
    if (m != 0 && id >= 0 && id < vocab) {
      const float count = static_cast<float>(m);
      v = (sublinear_tf ? 1.0f + logf(count) : count) * idf[id];
    }
    w[row + s] = v;
    squares += v * v;
  }
  squares = warp_sum(squares);
  if (threadIdx.x % 32 == 0) warp_squares[threadIdx.x / 32] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int k = 0; k < kThreads / 32; ++k) total += warp_squares[k];
    scale = total > 0.0f ? 1.0f / sqrtf(total) : 0.0f;
  }
  __syncthreads();
  for (int64_t s = threadIdx.x; s < seq; s += kThreads) w[row + s] *= scale;
}

}  // namespace

void tfidf_weights_cuda(const void* ids, DType ids_dtype, const uint8_t* mask, const float* idf, int64_t vocab,
                        float* w, int64_t batch, int64_t seq, bool sublinear_tf, void* stream) {
  if (batch == 0 || seq == 0) return;
  TANDEM_CHECK(batch <= INT32_MAX, "tfidf_weights on CUDA: batch {} exceeds 2^31 - 1", batch);
  auto launch = [&](auto* typed_ids) {
    using Id = std::remove_cv_t<std::remove_pointer_t<decltype(typed_ids)>>;
    tfidf_weights_kernel<Id><<<static_cast<unsigned>(batch), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        typed_ids, mask, idf, vocab, w, seq, sublinear_tf);
    TANDEM_CUDA_CHECK_LAUNCH();
  };
  if (ids_dtype == DType::I32)
    launch(static_cast<const int32_t*>(ids));
  else
    launch(static_cast<const int64_t*>(ids));
}

}  // namespace tandem::kernels
