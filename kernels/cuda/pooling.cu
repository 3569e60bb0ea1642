// Sequence pooling on the GPU: masked mean, weighted sum and first-token,
// forward and backward.
//
// Masked mean forward: a block owns 32 vector columns of one sequence and 16
// sequence lanes; lane l sums positions l, l + 16, ... (four loads in flight),
// skipping padding without reading it, then the 16 lane sums are added in lane
// order through shared memory (deterministic). Traffic: the real tokens' rows
// once, the mask once per column block. That is batch * dim / (32 V) blocks
// (32 at imdb's 32 x 512 x 256 in bf16, on 132 SMs), so with
// TANDEM_MASKED_MEAN=lane_groups (kernels/cuda/row_kernel_switches.h) the 16
// lanes are dealt to 2-16 blocks of 16 / groups lanes each, which write their
// lane sums and counts to f32 scratch (16 * batch * (dim + 1) floats), and a
// second kernel adds them in lane order: the same per-lane sums added in the
// same order, so the same bits, from enough blocks to cover every SM twice. Backward and first-token pooling are
// row copies / broadcasts over [B*S, D] with 16-byte vectors: write dx once,
// read dy rows from cache. All memory bound. Numerics: f32 sums, division by
// the f32 count (exact up to 2^24 tokens), one rounding per output. The
// weighted sum is the masked mean's kernel with an f32 weight per position in
// place of the mask (a zero weight skips the row's read) and no division; its
// backward scales dy[b] by the position's weight.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/pooling_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kLanes = 16;  // 32 x 16 threads: fits the 16-bit kernel's ~72 registers per thread
constexpr int kBatch = 4;

// Lane `lane` (of kLanes) of sequence b's masked sum at vector column c: positions lane, lane +
// kLanes, ... in order, kBatch loads in flight; acc is the f32 sum of the real ones and n their
// count. Both masked-mean forwards run exactly this per lane, so their lane sums are the same bits.
template <class T, int V>
__device__ __forceinline__ void masked_lane_sum(const T* __restrict__ x, const uint8_t* __restrict__ mask, int64_t b,
                                                int64_t c, bool valid, int lane, int64_t seq, int64_t dim,
                                                float (&acc)[V], float& n) {
  fill(acc, 0.0f);
  n = 0.0f;
  for (int64_t s0 = lane; s0 < seq; s0 += kLanes * kBatch) {
    bool real[kBatch];
    float v[kBatch][V];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t s = s0 + u * kLanes;
      real[u] = s < seq && mask[b * seq + s] != 0;
      if (real[u] && valid) load_vec<V>(x + (b * seq + s) * dim + c * V, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (!real[u]) continue;
      n += 1.0f;
      if (valid)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += v[u][k];
    }
  }
}

// The mean from the kLanes lane sums, added in lane order: lane l's count at counts[l], its sum of
// element k at sums[l * lane_stride + k]. Writes y[b]'s vector c, and count[b] once.
template <class T, int V>
__device__ __forceinline__ void masked_mean_of_lanes(const float* sums, int64_t lane_stride, const float* counts,
                                                     int64_t b, int64_t c, bool valid, int64_t dim, T* __restrict__ y,
                                                     float* __restrict__ count) {
  float total = 0.0f;
  for (int l = 0; l < kLanes; ++l) total += counts[l];
  if (c == 0) count[b] = total;
  if (!valid) return;
  float out[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float t = 0.0f;
    for (int l = 0; l < kLanes; ++l) t += sums[l * lane_stride + k];
    out[k] = total > 0.0f ? t / total : 0.0f;
  }
  store_vec<V>(y + b * dim + c * V, out);
}

template <class T, int V>
__global__ void __launch_bounds__(32 * kLanes) masked_mean_forward_kernel(const T* __restrict__ x, const uint8_t* __restrict__ mask,
                                           T* __restrict__ y, float* __restrict__ count, int64_t seq, int64_t dim) {
  __shared__ float lane_sums[kLanes][32 * V];
  __shared__ float lane_counts[kLanes];
  const int64_t b = blockIdx.y;
  const int64_t c = blockIdx.x * 32ll + threadIdx.x;
  const bool valid = c * V < dim;
  float acc[V], n;
  masked_lane_sum<T, V>(x, mask, b, c, valid, threadIdx.y, seq, dim, acc, n);
#pragma unroll
  for (int k = 0; k < V; ++k) lane_sums[threadIdx.y][threadIdx.x * V + k] = acc[k];
  if (threadIdx.x == 0) lane_counts[threadIdx.y] = n;
  __syncthreads();
  if (threadIdx.y != 0) return;
  masked_mean_of_lanes<T, V>(&lane_sums[0][threadIdx.x * V], 32 * V, lane_counts, b, c, valid, dim, y, count);
}

// TANDEM_MASKED_MEAN=lane_groups, pass 1: block (column block, b, z) runs lanes z * L .. z * L + L - 1
// (L = blockDim.y = kLanes / gridDim.z) and writes each lane's sums to sums[b, lane, dim] and its
// count to counts[b, lane] (f32 scratch).
template <class T, int V>
__global__ void __launch_bounds__(32 * kLanes) masked_mean_lanes_kernel(const T* __restrict__ x, const uint8_t* __restrict__ mask,
                                         float* __restrict__ sums, float* __restrict__ counts, int64_t seq,
                                         int64_t dim) {
  const int64_t b = blockIdx.y;
  const int64_t c = blockIdx.x * 32ll + threadIdx.x;
  const bool valid = c * V < dim;
  const int lane = static_cast<int>(blockIdx.z * blockDim.y + threadIdx.y);
  float acc[V], n;
  masked_lane_sum<T, V>(x, mask, b, c, valid, lane, seq, dim, acc, n);
  if (valid)
#pragma unroll
    for (int k = 0; k < V; ++k) sums[(b * kLanes + lane) * dim + c * V + k] = acc[k];
  if (c == 0) counts[b * kLanes + lane] = n;
}

// Pass 2: one thread per (vector column, b) adds the kLanes lane sums in lane order.
template <class T, int V>
__global__ void masked_mean_finish_kernel(const float* __restrict__ sums, const float* __restrict__ counts,
                                          T* __restrict__ y, float* __restrict__ count, int64_t dim) {
  const int64_t b = blockIdx.y;
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  masked_mean_of_lanes<T, V>(sums + b * kLanes * dim + c * V, dim, counts + b * kLanes, b, c, c * V < dim, dim, y,
                             count);
}

// y[b] = sum_s w[b, s] x[b, s]: masked_mean_forward_kernel's lanes and order, weights for the mask.
template <class T, int V>
__global__ void __launch_bounds__(32 * kLanes) weighted_sum_forward_kernel(const T* __restrict__ x, const float* __restrict__ w,
                                           T* __restrict__ y, int64_t seq, int64_t dim) {
  __shared__ float lane_sums[kLanes][32 * V];
  const int64_t b = blockIdx.y;
  const int64_t c = blockIdx.x * 32ll + threadIdx.x;
  const bool valid = c * V < dim;
  float acc[V];
  fill(acc, 0.0f);
  for (int64_t s0 = threadIdx.y; s0 < seq; s0 += kLanes * kBatch) {
    float ws[kBatch];
    float v[kBatch][V];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t s = s0 + u * kLanes;
      ws[u] = s < seq ? w[b * seq + s] : 0.0f;
      if (ws[u] != 0.0f && valid) load_vec<V>(x + (b * seq + s) * dim + c * V, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (ws[u] == 0.0f || !valid) continue;
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += ws[u] * v[u][k];
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) lane_sums[threadIdx.y][threadIdx.x * V + k] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || !valid) return;
  float out[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float t = 0.0f;
    for (int l = 0; l < kLanes; ++l) t += lane_sums[l][threadIdx.x * V + k];
    out[k] = t;
  }
  store_vec<V>(y + b * dim + c * V, out);
}

// dx[r] = w[r] * dy[r / seq] over rows r of [batch * seq, dim].
template <class T, int V>
__global__ void weighted_sum_backward_kernel(const T* __restrict__ dy, const float* __restrict__ w, T* __restrict__ dx,
                                             int64_t rows, int64_t seq, int64_t dim) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float v[V];
    const float wr = w[r];
    if (wr != 0.0f) {
      load_vec<V>(dy + (r / seq) * dim + c * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] *= wr;
    } else {
      fill(v, 0.0f);
    }
    store_vec<V>(dx + r * dim + c * V, v);
  }
}

// dx[r] = mask[r] ? dy[r / seq] / count[r / seq] : 0 over rows r of [batch * seq, dim].
template <class T, int V>
__global__ void masked_mean_backward_kernel(const T* __restrict__ dy, const uint8_t* __restrict__ mask,
                                            const float* __restrict__ count, T* __restrict__ dx, int64_t rows,
                                            int64_t seq, int64_t dim) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float v[V];
    if (mask[r]) {
      const int64_t b = r / seq;
      load_vec<V>(dy + b * dim + c * V, v);
      const float n = count[b];
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] /= n;
    } else {
      fill(v, 0.0f);
    }
    store_vec<V>(dx + r * dim + c * V, v);
  }
}

// y[b] = x[b * seq] (forward, rows = batch) or dx[r] = r % seq == 0 ? dy[r / seq] : 0 (backward, rows = batch * seq).
template <class T, int V, bool Backward>
__global__ void first_token_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t rows, int64_t seq,
                                   int64_t dim) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float v[V];
    if (!Backward) load_vec<V>(src + r * seq * dim + c * V, v);
    else if (r % seq == 0) load_vec<V>(src + (r / seq) * dim + c * V, v);
    else fill(v, 0.0f);
    store_vec<V>(dst + r * dim + c * V, v);
  }
}

// TANDEM_MASKED_MEAN=lane_groups: into how many blocks (1, 2, 4, 8 or 16) to deal each (column
// block, sequence)'s kLanes lanes: the fewest that give every SM of the device two blocks, or 16.
int masked_mean_lane_groups(int64_t blocks, int device) {
  int sms = 0;
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int groups = 1;
  while (groups < kLanes && blocks * groups < 2 * int64_t{sms}) groups *= 2;
  return groups;
}

// Grid for the row kernels: column blocks across, rows strided (about 4 rows per thread).
dim3 row_grid(int64_t nvec, int64_t rows, dim3 block) {
  return dim3(blocks_for(nvec, block.x, INT32_MAX), blocks_for(rows, block.y * 4, 65535));
}

}  // namespace

void masked_mean_pool_forward_cuda(const void* x, const uint8_t* mask, void* y, void* count, DType t, int64_t batch,
                                   int64_t seq, int64_t dim, int device, void* stream) {
  if (batch == 0) return;
  TANDEM_CHECK(batch <= 65535, "masked_mean_pool on CUDA: batch {} exceeds 65535", batch);
  auto s = static_cast<cudaStream_t>(stream);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "masked_mean_pool_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      const unsigned column_blocks = blocks_for(dim / V, 32, INT32_MAX);
      const int groups = masked_mean_kernel() == MaskedMeanKernel::LaneGroups
                             ? masked_mean_lane_groups(int64_t{column_blocks} * batch, device)
                             : 1;
      if (groups == 1) {
        masked_mean_forward_kernel<scalar_t, V><<<dim3(column_blocks, static_cast<unsigned>(batch)), dim3(32, kLanes), 0, s>>>(
            static_cast<const scalar_t*>(x), mask, static_cast<scalar_t*>(y), static_cast<float*>(count), seq, dim);
        TANDEM_CUDA_CHECK_LAUNCH();
        return;
      }
      Scratch scratch(device, static_cast<size_t>(batch * kLanes * (dim + 1)) * sizeof(float), s);
      float* sums = scratch.as<float>();
      float* counts = sums + batch * kLanes * dim;
      masked_mean_lanes_kernel<scalar_t, V>
          <<<dim3(column_blocks, static_cast<unsigned>(batch), static_cast<unsigned>(groups)),
             dim3(32, kLanes / groups), 0, s>>>(static_cast<const scalar_t*>(x), mask, sums, counts, seq, dim);
      TANDEM_CUDA_CHECK_LAUNCH();
      masked_mean_finish_kernel<scalar_t, V>
          <<<dim3(blocks_for(dim / V, 128, INT32_MAX), static_cast<unsigned>(batch)), 128, 0, s>>>(
              sums, counts, static_cast<scalar_t*>(y), static_cast<float*>(count), dim);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void masked_mean_pool_backward_cuda(const void* dy, const uint8_t* mask, const void* count, void* dx, DType t,
                                    int64_t batch, int64_t seq, int64_t dim, void* stream) {
  const int64_t rows = batch * seq;
  if (rows == 0 || dim == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "masked_mean_pool_backward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, dx});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 block = column_block(dim / V, rows);
      masked_mean_backward_kernel<scalar_t, V>
          <<<row_grid(dim / V, rows, block), block, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const scalar_t*>(dy), mask, static_cast<const float*>(count), static_cast<scalar_t*>(dx),
              rows, seq, dim);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void weighted_sum_pool_forward_cuda(const void* x, const void* w, void* y, DType t, int64_t batch, int64_t seq,
                                    int64_t dim, void* stream) {
  if (batch == 0 || dim == 0) return;
  TANDEM_CHECK(batch <= 65535, "weighted_sum_pool on CUDA: batch {} exceeds 65535", batch);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "weighted_sum_pool_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 grid(blocks_for(dim / V, 32, INT32_MAX), static_cast<unsigned>(batch));
      weighted_sum_forward_kernel<scalar_t, V><<<grid, dim3(32, kLanes), 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(x), static_cast<const float*>(w), static_cast<scalar_t*>(y), seq, dim);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void weighted_sum_pool_backward_cuda(const void* dy, const void* w, void* dx, DType t, int64_t batch, int64_t seq,
                                     int64_t dim, void* stream) {
  const int64_t rows = batch * seq;
  if (rows == 0 || dim == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "weighted_sum_pool_backward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, dx});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 block = column_block(dim / V, rows);
      weighted_sum_backward_kernel<scalar_t, V>
          <<<row_grid(dim / V, rows, block), block, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const scalar_t*>(dy), static_cast<const float*>(w), static_cast<scalar_t*>(dx), rows, seq,
              dim);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void first_token_pool_forward_cuda(const void* x, void* y, DType t, int64_t batch, int64_t seq, int64_t dim,
                                   void* stream) {
  if (batch == 0 || dim == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "first_token_pool_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, y});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 block = column_block(dim / V, batch);
      first_token_kernel<scalar_t, V, false>
          <<<row_grid(dim / V, batch, block), block, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const scalar_t*>(x), static_cast<scalar_t*>(y), batch, seq, dim);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void first_token_pool_backward_cuda(const void* dy, void* dx, DType t, int64_t batch, int64_t seq, int64_t dim,
                                    void* stream) {
  const int64_t rows = batch * seq;
  if (rows == 0 || dim == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "first_token_pool_backward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {dy, dx});
    with_width<scalar_t>(vec, [&]<int V>() {
      const dim3 block = column_block(dim / V, rows);
      first_token_kernel<scalar_t, V, true>
          <<<row_grid(dim / V, rows, block), block, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const scalar_t*>(dy), static_cast<scalar_t*>(dx), rows, seq, dim);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tandem::kernels
