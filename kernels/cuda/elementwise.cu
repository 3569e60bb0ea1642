// Elementwise kernels: add, mul, scale, relu forward/backward.
//
// Work: one pass over n elements; traffic is (inputs + 1) * n * sizeof(T)
// bytes, so these are memory bound. Each thread handles kVec consecutive
// elements with one 16-byte load per input where the pointers are 16-byte
// aligned (always true for whole tensors from our allocators), with a scalar
// tail and a scalar fallback for unaligned views.
// Numerics: arithmetic in f32 (load/store round-trip), one rounding per output,
// identical to the CPU reference.
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/elementwise_cuda.h"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;

template <class T>
struct alignas(16) Vec {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

// Applies f(i-th elements...) -> out over n elements; F is a device functor on acc_t values.
template <class T, int NIn, class F>
__global__ void map_kernel(F f, T* __restrict__ out, const T* __restrict__ in0, const T* __restrict__ in1,
                           int64_t n, bool vectorized) {
  constexpr int V = Vec<T>::N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t n_vec = vectorized ? n / V : 0;
  for (int64_t i = tid; i < n_vec; i += stride) {
    Vec<T> a = reinterpret_cast<const Vec<T>*>(in0)[i];
    Vec<T> b;
    if constexpr (NIn == 2) b = reinterpret_cast<const Vec<T>*>(in1)[i];
    Vec<T> r;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if constexpr (NIn == 2) r.v[k] = store<T>(f(load(a.v[k]), load(b.v[k])));
      else r.v[k] = store<T>(f(load(a.v[k]), 0.0f));
    }
    reinterpret_cast<Vec<T>*>(out)[i] = r;
  }
  for (int64_t i = n_vec * V + tid; i < n; i += stride) {
    if constexpr (NIn == 2) out[i] = store<T>(f(load(in0[i]), load(in1[i])));
    else out[i] = store<T>(f(load(in0[i]), 0.0f));
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

int grid_for(int64_t n, int per_thread) {
  int64_t b = (n / per_thread + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  // Enough blocks to fill every SM several times; grid-stride covers the rest.
  return static_cast<int>(b < 8192 ? b : 8192);
}

template <class T, int NIn, class F>
void launch_map(F f, void* out, const void* in0, const void* in1, int64_t n, void* stream) {
  if (n == 0) return;
  bool vec = aligned16(out) && aligned16(in0) && (NIn == 1 || aligned16(in1));
  map_kernel<T, NIn><<<grid_for(n, vec ? Vec<T>::N : 1), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      f, static_cast<T*>(out), static_cast<const T*>(in0), static_cast<const T*>(in1), n, vec);
  TANDEM_CUDA_CHECK_LAUNCH();
}

struct AddF {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulF {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct ScaleF {
  float alpha;
  __device__ float operator()(float a, float) const { return alpha * a; }
};
struct ReluF {
  __device__ float operator()(float a, float) const { return a > 0.0f ? a : 0.0f; }
};
// relu backward as a binary map over (dy, x).
struct ReluGradF {
  __device__ float operator()(float dy, float x) const { return x > 0.0f ? dy : 0.0f; }
};

}  // namespace

void binary_cuda(BinaryOp op, const void* a, const void* b, void* out, DType t, int64_t n, void* stream) {
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "binary_cuda", [&] {
    if (op == BinaryOp::Add) launch_map<scalar_t, 2>(AddF{}, out, a, b, n, stream);
    else launch_map<scalar_t, 2>(MulF{}, out, a, b, n, stream);
  });
}

void scale_cuda(const void* x, void* out, DType t, int64_t n, double alpha, void* stream) {
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "scale_cuda", [&] {
    launch_map<scalar_t, 1>(ScaleF{static_cast<float>(alpha)}, out, x, nullptr, n, stream);
  });
}

void relu_forward_cuda(const void* x, void* y, DType t, int64_t n, void* stream) {
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "relu_forward_cuda",
                               [&] { launch_map<scalar_t, 1>(ReluF{}, y, x, nullptr, n, stream); });
}

void relu_backward_cuda(const void* dy, const void* x, void* dx, DType t, int64_t n, void* stream) {
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "relu_backward_cuda",
                               [&] { launch_map<scalar_t, 2>(ReluGradF{}, dx, dy, x, n, stream); });
}

}  // namespace tandem::kernels
