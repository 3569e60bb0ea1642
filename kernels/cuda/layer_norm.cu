// Layer norm's launches on the GPU, alone and after the sublayer's bias + dropout +
// residual (TANDEM_ADD_LAYER_NORM=fused): which kernel, layout and grid (the kernels,
// their traffic and numerics: kernels/cuda/layer_norm_kernels.cuh), and the
// parameter gradients' finish pass (kernels/cuda/column_sum.cuh).
#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/column_sum.cuh"
#include "kernels/cuda/dropout_factors.cuh"
#include "kernels/cuda/layer_norm_cuda.h"
#include "kernels/cuda/layer_norm_kernels.cuh"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"

namespace tandem::kernels {

using namespace layer_norm_detail;

namespace {

// The forward's launch; Add: TANDEM_ADD_LAYER_NORM=fused's, whose input is s = dropout(x + in.bias) +
// in.residual (stored to in.sum on the way).
template <bool Add>
void launch_forward(const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                    int64_t rows, int64_t dim, double eps, DType t, DType wt, const void* residual,
                    const void* branch_bias, void* sum, const DropoutMask& m, void* stream) {
  if (rows == 0) return;
  const bool w_f32 = wt == DType::F32;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "layer_norm_forward_cuda", [&] {
    const size_t wsize = w_f32 ? 4 : sizeof(scalar_t);
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, y, residual, sum}) &&
                     aligned_to(weight, wsize * kVec16<scalar_t>) && aligned_to(bias, wsize * kVec16<scalar_t>) &&
                     (!Add || aligned_to(branch_bias, 16));
    const Layout l = layout_for(dim, vec ? kVec16<scalar_t> : 1);
    const bool multi = layer_norm_kernel() == LayerNormKernel::MultiRow;
    with_layout<scalar_t>(l, [&]<int V, int C>() {
      auto launch = [&]<int R>() {
        const dim3 grid(blocks_for(rows, int64_t{l.ty} * R, INT32_MAX)), block(l.tx, l.ty);
        const auto* px = static_cast<const scalar_t*>(x);
        auto* py = static_cast<scalar_t*>(y);
        auto* pm = static_cast<float*>(mean);
        auto* pr = static_cast<float*>(rstd);
        const float e = static_cast<float>(eps);
        if constexpr (Add)
          residual_layer_norm_forward_kernel<scalar_t, V, C, R><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
              px, weight, bias, w_f32, py, pm, pr, rows, dim, e,
              ResidualIn<scalar_t>{static_cast<const scalar_t*>(residual), static_cast<const scalar_t*>(branch_bias),
                                   static_cast<scalar_t*>(sum), m});
        else
          layer_norm_forward_kernel<scalar_t, V, C, R><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
              px, weight, bias, w_f32, py, pm, pr, rows, dim, e);
        TANDEM_CUDA_CHECK_LAUNCH();
      };
      if (multi) launch.template operator()<multi_row_rows(V * C)>();
      else launch.template operator()<1>();
    });
  });
}

// dweight and dbias (either may be null) from their partial sums: both in one launch when both are
// wanted (the usual case); zeros when there are no rows.
template <class T>
void finish_parameter_gradients(const float* pw, void* dweight, const float* pb, void* dbias, int64_t rows,
                                int64_t slots, int64_t dim, bool w_f32, cudaStream_t s) {
  if (rows == 0) {
    for (void* out : {dweight, dbias})
      if (out) TANDEM_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(dim) * (w_f32 ? 4 : sizeof(T)), s));
    return;
  }
  auto finish = [&]<class Out>() {
    if (dweight && dbias)
      column_sum_finish(pw, static_cast<Out*>(dweight), pb, static_cast<Out*>(dbias), slots, dim, s);
    else if (dweight || dbias)
      column_sum_finish(dweight ? pw : pb, slots, dim, static_cast<Out*>(dweight ? dweight : dbias), s);
  };
  if (w_f32) finish.template operator()<float>();
  else finish.template operator()<T>();
}

}  // namespace

void layer_norm_forward_cuda(const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                             int64_t rows, int64_t dim, double eps, DType t, DType wt, void* stream) {
  launch_forward<false>(x, weight, bias, y, mean, rstd, rows, dim, eps, t, wt, nullptr, nullptr, nullptr,
                        DropoutMask{}, stream);
}

void bias_dropout_add_layer_norm_forward_cuda(const void* x, const void* branch_bias, const void* residual, void* sum,
                                              float p, uint64_t seed, uint64_t subsequence, const int64_t* step,
                                              const void* weight, const void* bias, void* y, void* mean, void* rstd,
                                              int64_t rows, int64_t dim, double eps, DType t, DType wt, void* stream) {
  launch_forward<true>(x, weight, bias, y, mean, rstd, rows, dim, eps, t, wt, residual, branch_bias, sum,
                       dropout_mask(p, seed, subsequence, step), stream);
}

void layer_norm_backward_cuda(const void* dy, const void* x, const void* weight, const void* mean, const void* rstd,
                              void* dx, void* dweight, void* dbias, int64_t rows, int64_t dim, DType t, DType wt,
                              int device, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const bool w_f32 = wt == DType::F32;
  const int64_t slots = column_sum_slots(rows, dim);
  PartialSums partial(device, (dweight || dbias) && rows > 0 ? slots : 0, dim, 2, s);
  float* pw = dweight ? partial.get(0) : nullptr;
  float* pb = dbias ? partial.get(1) : nullptr;
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "layer_norm_backward_cuda", [&] {
    if (rows > 0) {
      const size_t wsize = w_f32 ? 4 : sizeof(scalar_t);
      const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {x, dy, dx}) &&
                       aligned_to(weight, wsize * kVec16<scalar_t>);
      const Layout l = layout_for(dim, vec ? kVec16<scalar_t> : 1);
      const LayerNormKernel kernel = layer_norm_kernel();
      with_layout<scalar_t>(l, [&]<int V, int C>() {
        if (kernel == LayerNormKernel::Lanes) {
          layer_norm_backward_lanes_kernel<scalar_t, V, C><<<blocks_for(slots, 1, INT32_MAX), dim3(l.tx, l.ty), 0, s>>>(
              static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(x), weight, w_f32,
              static_cast<const float*>(mean), static_cast<const float*>(rstd), static_cast<scalar_t*>(dx), pw, pb,
              rows, dim, slots);
          TANDEM_CUDA_CHECK_LAUNCH();
          return;
        }
        auto launch = [&]<int D>() {
          layer_norm_backward_kernel<scalar_t, V, C, D><<<blocks_for(slots, l.ty, INT32_MAX), dim3(l.tx, l.ty), 0, s>>>(
              static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(x), weight, w_f32,
              static_cast<const float*>(mean), static_cast<const float*>(rstd), static_cast<scalar_t*>(dx), pw, pb,
              rows, dim, slots);
          TANDEM_CUDA_CHECK_LAUNCH();
        };
        if (kernel == LayerNormKernel::MultiRow) launch.template operator()<multi_row_buffers(V * C)>();
        else launch.template operator()<2>();
      });
    }
    finish_parameter_gradients<scalar_t>(pw, dweight, pb, dbias, rows, slots, dim, w_f32, s);
  });
}

void bias_dropout_add_layer_norm_backward_cuda(const void* dy, const void* sum, const void* weight, const void* mean,
                                               const void* rstd, void* dsum, void* dweight, void* dbias, void* dbranch,
                                               void* dbranch_bias, float p, uint64_t seed, uint64_t subsequence,
                                               const int64_t* step, int64_t rows, int64_t dim, DType t, DType wt,
                                               int device, void* stream) {
  TANDEM_CHECK(dsum, "bias_dropout_add_layer_norm_backward_cuda: the gradient of the sum is always written");
  const LayerNormKernel kernel = layer_norm_kernel();
  auto s = static_cast<cudaStream_t>(stream);
  const bool w_f32 = wt == DType::F32;
  const int64_t slots = column_sum_slots(rows, dim);
  // The branch bias's array only when it has a gradient (TANDEM_BIAS_GRADIENT=gemm forms it in the linear).
  PartialSums partial(device, (dweight || dbias || dbranch_bias) && rows > 0 ? slots : 0, dim, dbranch_bias ? 3 : 2, s);
  float* pw = dweight ? partial.get(0) : nullptr;
  float* pb = dbias ? partial.get(1) : nullptr;
  float* pbb = dbranch_bias ? partial.get(2) : nullptr;
  const DropoutMask m = dropout_mask(p, seed, subsequence, step);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "bias_dropout_add_layer_norm_backward_cuda", [&] {
    if (rows > 0) {
      const size_t wsize = w_f32 ? 4 : sizeof(scalar_t);
      const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {sum, dy, dsum, dbranch}) &&
                       aligned_to(weight, wsize * kVec16<scalar_t>);
      const Layout l = layout_for(dim, vec ? kVec16<scalar_t> : 1);
      with_layout<scalar_t>(l, [&]<int V, int C>() {
        if (kernel == LayerNormKernel::Lanes) {
          residual_layer_norm_backward_lanes_kernel<scalar_t, V, C>
              <<<blocks_for(slots, 1, INT32_MAX), dim3(l.tx, l.ty), 0, s>>>(
                  static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(sum), weight, w_f32,
                  static_cast<const float*>(mean), static_cast<const float*>(rstd), static_cast<scalar_t*>(dsum), pw,
                  pb, rows, dim, slots, m, static_cast<scalar_t*>(dbranch), pbb);
          TANDEM_CUDA_CHECK_LAUNCH();
          return;
        }
        auto launch = [&]<int D>() {
          residual_layer_norm_backward_kernel<scalar_t, V, C, D>
              <<<blocks_for(slots, l.ty, INT32_MAX), dim3(l.tx, l.ty), 0, s>>>(
                  static_cast<const scalar_t*>(dy), static_cast<const scalar_t*>(sum), weight, w_f32,
                  static_cast<const float*>(mean), static_cast<const float*>(rstd), static_cast<scalar_t*>(dsum), pw,
                  pb, rows, dim, slots, m, static_cast<scalar_t*>(dbranch), pbb);
          TANDEM_CUDA_CHECK_LAUNCH();
        };
        if (kernel == LayerNormKernel::MultiRow) launch.template operator()<multi_row_buffers(V * C)>();
        else launch.template operator()<2>();
      });
    }
    finish_parameter_gradients<scalar_t>(pw, dweight, pb, dbias, rows, slots, dim, w_f32, s);
    if (!dbranch_bias) return;
    if (rows == 0) TANDEM_CUDA_CHECK(cudaMemsetAsync(dbranch_bias, 0, static_cast<size_t>(dim) * sizeof(scalar_t), s));
    else column_sum_finish(pbb, slots, dim, static_cast<scalar_t*>(dbranch_bias), s);
  });
}

}  // namespace tandem::kernels
