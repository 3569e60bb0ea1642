#include "kernels/tfidf_weights.h"

#include "core/check.h"
#include "core/op_scope.h"
#include "kernels/cpu/index_range_cpu.h"
#include "kernels/cpu/tfidf_weights_cpu.h"
#include "kernels/device_stream.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/tfidf_weights_cuda.h"
#endif

namespace tandem::kernels {

Tensor tfidf_weights(const Tensor& ids, const Tensor& mask, const Tensor& idf, bool sublinear_tf) {
  OpScope scope("tfidf_weights");
  TANDEM_CHECK(ids.defined() && (ids.dtype() == DType::I32 || ids.dtype() == DType::I64) && ids.dim() == 2,
               "tfidf_weights: ids must be [batch, seq] i32 or i64, got {}", ids.defined() ? ids.str() : "undefined");
  TANDEM_CHECK(mask.defined() && mask.dtype() == DType::U8 && mask.shape() == ids.shape(),
               "tfidf_weights: mask must be u8 of the ids' shape {}, got {}", ids.str(),
               mask.defined() ? mask.str() : "undefined");
  TANDEM_CHECK(idf.defined() && (idf.dtype() == DType::F32 || idf.dtype() == DType::F64) && idf.dim() == 1,
               "tfidf_weights: idf must be a [vocab] f32 or f64 vector, got {}", idf.defined() ? idf.str() : "undefined");
  TANDEM_CHECK(mask.device() == ids.device() && idf.device() == ids.device(),
               "tfidf_weights: ids, mask and idf must share a device, got {}, {} and {}", ids.device().str(),
               mask.device().str(), idf.device().str());
  const int64_t batch = ids.size(0), seq = ids.size(1), vocab = idf.size(0);
  Tensor w = Tensor::empty({batch, seq}, idf.dtype(), ids.device());
  if (ids.device().is_cpu()) {
    const int64_t bad = first_out_of_range_cpu(ids.data_ptr(), ids.dtype(), ids.numel(), vocab);
    TANDEM_CHECK(bad < 0, "tfidf_weights: token id {} at [batch {}, position {}] is outside the idf table [0, {})",
                 index_at(ids.data_ptr(), ids.dtype(), bad), bad / seq, bad % seq, vocab);
    tfidf_weights_cpu(ids.data_ptr(), ids.dtype(), mask.data<uint8_t>(), idf.data_ptr(), w.data_ptr(), idf.dtype(),
                      batch, seq, sublinear_tf);
  } else {
    TANDEM_CHECK(idf.dtype() == DType::F32, "tfidf_weights on CUDA: idf must be f32, got {}", idf.str());
    TANDEM_CUDA_ONLY(tfidf_weights_cuda(ids.data_ptr(), ids.dtype(), mask.data<uint8_t>(), idf.data<float>(), vocab,
                                        w.data<float>(), batch, seq, sublinear_tf, stream_of(w)));
  }
  return w;
}

}  // namespace tandem::kernels
