#include "optim/clip_grad.h"

#include "core/check.h"
#include "kernels/device_stream.h"
#include "optim/cpu/clip_cpu.h"

#if TANDEM_WITH_CUDA
#include "optim/cuda/clip_cuda.h"
#endif

namespace tandem::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  TANDEM_CHECK(max_norm >= 0.0, "clip_grad_norm_: max_norm must be >= 0, got {}", max_norm);
  TensorList list;
  Tensor first;
  for (size_t i = 0; i < params.size(); ++i) {
    TANDEM_CHECK(params[i].defined(), "clip_grad_norm_: parameter {} is undefined", i);
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    if (!first.defined()) first = g;
    TANDEM_CHECK(g.dtype() == DType::F32 && g.device() == first.device(),
                 "clip_grad_norm_: the gradient of parameter {} is {}; all must be f32 on {}", i, g.str(),
                 first.device().str());
    TensorListEntry e;
    e.ptr[0] = static_cast<float*>(g.data_ptr());
    e.numel = g.numel();
    list.push_back(e);
    g.bump_version();
  }
  if (!first.defined()) return Tensor::zeros({});
  Tensor total = Tensor::empty({}, DType::F32, first.device());
  if (first.device().is_cpu()) {
    clip_grad_norm_cpu(list, max_norm, static_cast<float*>(total.data_ptr()));
  } else {
    TANDEM_CUDA_ONLY(clip_grad_norm_cuda(list, max_norm, static_cast<float*>(total.data_ptr()),
                                         first.device().index, kernels::stream_of(first)));
  }
  return total;
}

}  // namespace tandem::optim
