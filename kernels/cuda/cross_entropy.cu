// Fused softmax + cross-entropy (optionally class-weighted), the gradient scaling of its backward, and accuracy, on the GPU.
//
// One warp per row of logits [N, C] (8 rows per block). Pass 1: each lane keeps
// an online (max, sum of exp) over classes lane, lane + 32, ... and the sum of
// logits; lanes merge with shuffles. Pass 2 (only when the gradient is needed)
// re-reads the row (from L1/L2) and writes dlogits. Traffic: read logits once
// from memory, write dlogits once, 4 bytes of row loss per row; the mean of the
// row losses is reduce.cu's fixed-order sum. Loads are coalesced scalars: for a
// classifier C is small (2..100) and this op is a negligible part of a step.
// Numerics: f32 log-sum-exp with the max subtracted (finite for any finite
// logits), expf/logf, one rounding of each dlogit to the logits' type.
// Labels are checked on the device (kernels/cuda/index_error_cuda.h).
// Class weights add one pass over the labels (row weights, summed in
// reduce.cu's fixed order into the device scalar W) and one f32 weight read
// per class per row; the row kernel divides by W, so no host sync.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/cross_entropy_cuda.h"
#include "kernels/cuda/index_error_cuda.h"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

namespace {

constexpr int kRowsPerBlock = 8;

template <class I>
__device__ __forceinline__ int64_t checked_label(const I* labels, int64_t row, int64_t classes, IndexErrorOp op,
                                                 IndexErrorRecord* err) {
  const int64_t y = static_cast<int64_t>(labels[row]);
  if (y < 0 || y >= classes) {
    if ((threadIdx.x & 31) == 0) report_index_error(err, op, row, y, classes);
    return -1;
  }
  return y;
}

// (m, s): s = sum exp(z - m) over a set; merging keeps the larger max.
__device__ __forceinline__ void merge_lse(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;  // both sets empty or all -inf: nothing to add
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

template <class T, class I>
__global__ void cross_entropy_kernel(const T* __restrict__ logits, const I* __restrict__ labels,
                                     float* __restrict__ row_loss, float* __restrict__ dlogits, int64_t n, int64_t classes,
                                     float eps, IndexErrorRecord* err) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (row >= n) return;
  const int lane = threadIdx.x;
  const T* z = logits + row * classes;
  float m = -INFINITY, s = 0.0f, sz = 0.0f;
  for (int64_t c = lane; c < classes; c += 32) {
    const float v = to_f32(z[c]);
    merge_lse(m, s, v, 1.0f);
    sz += v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge_lse(m, s, m2, s2);
    sz += __shfl_xor_sync(0xffffffffu, sz, o);
  }
  const float lse = m + logf(s);
  const int64_t y = checked_label(labels, row, classes, IndexErrorOp::CrossEntropyLabels, err);
  const float off = eps / static_cast<float>(classes);
  if (lane == 0) row_loss[row] = y < 0 ? 0.0f : lse - (1.0f - eps) * to_f32(z[y]) - off * sz;
  if (!dlogits) return;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t c = lane; c < classes; c += 32) {
    const float target = (c == y ? 1.0f - eps : 0.0f) + off;
    dlogits[row * classes + c] = y < 0 ? 0.0f : (expf(to_f32(z[c]) - lse) - target) * inv_n;
  }
}

// row_weight[i] = w[y_i] (0 for an out-of-range label, which checked_label reports).
template <class I>
__global__ void row_weight_kernel(const I* __restrict__ labels, const float* __restrict__ w,
                                  float* __restrict__ row_weight, int64_t n, int64_t classes, IndexErrorRecord* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t y = static_cast<int64_t>(labels[i]);
    if (y < 0 || y >= classes) {
      report_index_error(err, IndexErrorOp::CrossEntropyLabels, i, y, classes);
      row_weight[i] = 0.0f;
    } else {
      row_weight[i] = w[y];
    }
  }
}

// The class-weighted loss: cross_entropy_kernel's pass structure, with the
// sums weighted by w and everything divided by the device scalar *total
// (sum_i w[y_i], from row_weight_kernel and the fixed-order sum), so nothing
// waits for the host.
template <class T, class I>
__global__ void weighted_cross_entropy_kernel(const T* __restrict__ logits, const I* __restrict__ labels,
                                              const float* __restrict__ w, const float* __restrict__ total,
                                              float* __restrict__ row_loss, float* __restrict__ dlogits, int64_t n,
                                              int64_t classes, float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (row >= n) return;
  const int lane = threadIdx.x;
  const T* z = logits + row * classes;
  float m = -INFINITY, s = 0.0f, swz = 0.0f, sw = 0.0f;
  for (int64_t c = lane; c < classes; c += 32) {
    const float v = to_f32(z[c]);
    merge_lse(m, s, v, 1.0f);
    swz += w[c] * v;
    sw += w[c];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge_lse(m, s, m2, s2);
    swz += __shfl_xor_sync(0xffffffffu, swz, o);
    sw += __shfl_xor_sync(0xffffffffu, sw, o);
  }
  const float lse = m + logf(s);
  const int64_t y = static_cast<int64_t>(labels[row]);  // checked by row_weight_kernel
  const bool valid = y >= 0 && y < classes;
  const float off = eps / static_cast<float>(classes);
  const float inv_total = 1.0f / *total;
  const float wy = valid ? w[y] : 0.0f;
  if (lane == 0)
    row_loss[row] = valid ? ((1.0f - eps) * wy * (lse - to_f32(z[y])) + off * (sw * lse - swz)) * inv_total : 0.0f;
  if (!dlogits) return;
  for (int64_t c = lane; c < classes; c += 32) {
    const float p = expf(to_f32(z[c]) - lse);
    const float hard = (1.0f - eps) * wy * (p - (c == y ? 1.0f : 0.0f));
    dlogits[row * classes + c] = valid ? (hard + off * (sw * p - w[c])) * inv_total : 0.0f;
  }
}

template <class T>
__global__ void scale_by_scalar_kernel(const float* __restrict__ src, const float* __restrict__ g, T* __restrict__ dst,
                                       int64_t n) {
  const float s = g[0];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_f32<T>(src[i] * s);
}

// a beats b: a NaN beats a number; a larger number wins; ties go to the smaller index.
__device__ __forceinline__ bool beats(float a, int64_t ia, float b, int64_t ib) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

template <class T, class I>
__global__ void accuracy_kernel(const T* __restrict__ logits, const I* __restrict__ labels, int64_t n,
                                int64_t classes, unsigned long long* __restrict__ count, IndexErrorRecord* err) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (row >= n) return;
  const int lane = threadIdx.x;
  float best = -INFINITY;
  int64_t best_i = INT64_MAX;
  for (int64_t c = lane; c < classes; c += 32) {
    const float v = to_f32(logits[row * classes + c]);
    if (beats(v, c, best, best_i)) {
      best = v;
      best_i = c;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float b2 = __shfl_xor_sync(0xffffffffu, best, o);
    const int64_t i2 = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (beats(b2, i2, best, best_i)) {
      best = b2;
      best_i = i2;
    }
  }
  const int64_t y = checked_label(labels, row, classes, IndexErrorOp::AccuracyLabels, err);
  if (lane == 0 && y >= 0 && best_i == y) atomicAdd(count, 1ull);  // integer: order does not matter
}

template <class F>
void with_label_type(DType lt, F&& f) {
  if (lt == DType::I32) f(int32_t{});
  else if (lt == DType::I64) f(int64_t{});
  else TANDEM_FAIL("labels must be i32 or i64, got {}", dtype_name(lt));
}

}  // namespace

void cross_entropy_forward_cuda(const void* logits, const void* labels, DType label_type, void* row_loss,
                                void* dlogits, DType t, int64_t n, int64_t classes, double label_smoothing,
                                void* stream) {
  if (n == 0) return;
  IndexErrorRecord* err = index_error_record();
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "cross_entropy_forward_cuda", [&] {
    with_label_type(label_type, [&](auto label_tag) {
      using I = decltype(label_tag);
      cross_entropy_kernel<scalar_t, I><<<blocks_for(n, kRowsPerBlock, INT32_MAX), dim3(32, kRowsPerBlock), 0,
                                          static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(logits), static_cast<const I*>(labels), static_cast<float*>(row_loss),
          static_cast<float*>(dlogits), n, classes, static_cast<float>(label_smoothing), err);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void class_weight_of_rows_cuda(const void* labels, DType label_type, const void* class_weights, void* row_weight,
                               int64_t n, int64_t classes, void* stream) {
  if (n == 0) return;
  IndexErrorRecord* err = index_error_record();
  with_label_type(label_type, [&](auto label_tag) {
    using I = decltype(label_tag);
    row_weight_kernel<I><<<blocks_for(n, 256, 132 * 16), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const I*>(labels), static_cast<const float*>(class_weights), static_cast<float*>(row_weight), n,
        classes, err);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_weighted_forward_cuda(const void* logits, const void* labels, DType label_type,
                                         const void* class_weights, const void* total_weight, void* row_loss,
                                         void* dlogits, DType t, int64_t n, int64_t classes, double label_smoothing,
                                         void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "cross_entropy_weighted_forward_cuda", [&] {
    with_label_type(label_type, [&](auto label_tag) {
      using I = decltype(label_tag);
      weighted_cross_entropy_kernel<scalar_t, I><<<blocks_for(n, kRowsPerBlock, INT32_MAX), dim3(32, kRowsPerBlock),
                                                   0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const scalar_t*>(logits), static_cast<const I*>(labels),
          static_cast<const float*>(class_weights), static_cast<const float*>(total_weight),
          static_cast<float*>(row_loss), static_cast<float*>(dlogits), n, classes,
          static_cast<float>(label_smoothing));
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

void scale_by_scalar_cuda(const void* src, const void* g, void* dst, DType t, int64_t n, void* stream) {
  if (n == 0) return;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "scale_by_scalar_cuda", [&] {
    scale_by_scalar_kernel<scalar_t><<<blocks_for(n, 256, 132 * 16), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const float*>(src), static_cast<const float*>(g), static_cast<scalar_t*>(dst), n);
    TANDEM_CUDA_CHECK_LAUNCH();
  });
}

void accuracy_count_cuda(const void* logits, const void* labels, DType label_type, void* count, DType t, int64_t n,
                         int64_t classes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(int64_t), s));
  if (n == 0) return;
  IndexErrorRecord* err = index_error_record();
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "accuracy_count_cuda", [&] {
    with_label_type(label_type, [&](auto label_tag) {
      using I = decltype(label_tag);
      accuracy_kernel<scalar_t, I><<<blocks_for(n, kRowsPerBlock, INT32_MAX), dim3(32, kRowsPerBlock), 0, s>>>(
          static_cast<const scalar_t*>(logits), static_cast<const I*>(labels), n, classes,
          static_cast<unsigned long long*>(count), err);
      TANDEM_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tandem::kernels
