#include "kernels/cpu/linear_cpu.h"

#include <Eigen/Core>
#include <algorithm>

#include "core/element.h"
#include "kernels/cpu/isa/cpu_kernels.h"

namespace tandem::kernels {

namespace {

template <class A>
using Mat = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class A>
using Vec = Eigen::Matrix<A, 1, Eigen::Dynamic>;

// A matrix of acc_t values: a view for f32/f64, a widened copy for 16-bit types.
template <class T>
Mat<acc_t<T>> widen(const void* p, int64_t r, int64_t c) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<T, A>) {
    return Eigen::Map<const Mat<A>>(static_cast<const A*>(p), r, c);
  } else {
    Mat<A> m(r, c);
    const T* src = static_cast<const T*>(p);
    for (int64_t i = 0; i < r * c; ++i) m.data()[i] = load(src[i]);
    return m;
  }
}

template <class T, class M>
void narrow_store(const M& m, void* dst) {
  T* d = static_cast<T*>(dst);
  const int64_t n = m.size();
  for (int64_t i = 0; i < n; ++i) d[i] = store<T>(m.data()[i]);
}

// f32: the selected ISA's GEMM on the tensors in place. The bias is written
// into y first and the product added to it (beta = 1): no temporary.
void linear_forward_f32(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t in,
                        int64_t out) {
  if (b) {
    for (int64_t r = 0; r < rows; ++r) std::copy(b, b + out, y + r * out);
  }
  cpu_kernels().gemm(false, true, rows, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

void linear_backward_f32(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                         int64_t rows, int64_t in, int64_t out) {
  const CpuKernels& k = cpu_kernels();
  if (dx) k.gemm(false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
  if (dw) k.gemm(true, false, out, in, rows, 1.0f, dy, out, x, in, 0.0f, dw, in);
  if (db) k.column_sum(dy, rows, out, db);
}

}  // namespace

void linear_forward_cpu(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in,
                        int64_t out, DType t) {
  if (t == DType::F32) {
    linear_forward_f32(static_cast<const float*>(x), static_cast<const float*>(w), static_cast<const float*>(b),
                       static_cast<float*>(y), rows, in, out);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "linear_forward_cpu", [&] {
    using A = acc_t<scalar_t>;
    Mat<A> X = widen<scalar_t>(x, rows, in);
    Mat<A> W = widen<scalar_t>(w, out, in);
    Mat<A> Y = X * W.transpose();
    if (b) Y.rowwise() += Vec<A>(widen<scalar_t>(b, 1, out));
    narrow_store<scalar_t>(Y, y);
  });
}

void linear_backward_cpu(const void* dy, const void* x, const void* w, void* dx, void* dw, void* db, int64_t rows,
                         int64_t in, int64_t out, DType t, DType dw_dtype, DType db_dtype) {
  if (t == DType::F32 && dw_dtype == DType::F32 && db_dtype == DType::F32) {
    linear_backward_f32(static_cast<const float*>(dy), static_cast<const float*>(x), static_cast<const float*>(w),
                        static_cast<float*>(dx), static_cast<float*>(dw), static_cast<float*>(db), rows, in, out);
    return;
  }
  TANDEM_DISPATCH_FLOAT(t, "linear_backward_cpu", [&] {
    using A = acc_t<scalar_t>;
    // One sum each, stored in its gradient's dtype: rounding a master's f32 gradient to t gives t's bits.
    auto store_as = [](DType d, const auto& m, void* dst) {
      TANDEM_DISPATCH_FLOAT(d, "linear_backward_cpu", [&] { narrow_store<scalar_t>(m, dst); });
    };
    Mat<A> DY = widen<scalar_t>(dy, rows, out);
    if (dx) narrow_store<scalar_t>(Mat<A>(DY * widen<scalar_t>(w, out, in)), dx);
    if (dw) store_as(dw_dtype, Mat<A>(DY.transpose() * widen<scalar_t>(x, rows, in)), dw);
    if (db) store_as(db_dtype, Vec<A>(DY.colwise().sum()), db);
  });
}

}  // namespace tandem::kernels
