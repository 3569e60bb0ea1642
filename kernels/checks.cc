#include "kernels/checks.h"

#include "core/check.h"

namespace tandem::kernels {

void check_same_device_and_dtype(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  int i = 0;
  for (const Tensor* t : tensors) {
    TANDEM_CHECK(t->defined(), "{}: input {} is undefined", op, i);
    if (!first) {
      first = t;
    } else {
      TANDEM_CHECK(t->device() == first->device(), "{}: input {} is on {} but input 0 is on {}", op, i,
                   t->device().str(), first->device().str());
      TANDEM_CHECK(t->dtype() == first->dtype(), "{}: input {} is {} but input 0 is {} (cast first)", op, i,
                   dtype_name(t->dtype()), dtype_name(first->dtype()));
    }
    ++i;
  }
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  TANDEM_CHECK(a.shape() == b.shape(), "{}: shapes {} and {} differ (no broadcasting)", op, shape_str(a.shape()),
               shape_str(b.shape()));
}

}  // namespace tandem::kernels
