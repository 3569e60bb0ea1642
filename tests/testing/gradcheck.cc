#include "tests/testing/gradcheck.h"

#include <cmath>
#include <sstream>

#include "core/autograd/grad_mode.h"
#include "core/random.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace tandem::testing {

Tensor random_tensor(const Shape& shape, uint64_t seed, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, DType::F64);
  fill_normal(t, seed, 0);
  return t.to(device, dtype);
}

namespace {
double projected(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                 const Tensor& r) {
  NoGradGuard no_grad;
  return kernels::sum(kernels::mul(f(inputs), r)).item();
}
}  // namespace

::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, GradcheckOptions options) {
  for (const Tensor& t : inputs) {
    if (t.dtype() != DType::F64 || !t.device().is_cpu())
      return ::testing::AssertionFailure() << "gradcheck needs f64 CPU inputs, got " << t.str();
  }
  Tensor out = f(inputs);
  Tensor r = random_tensor(out.shape(), 12345);
  for (const Tensor& t : inputs)
    if (t.requires_grad()) const_cast<Tensor&>(t).set_grad(Tensor());
  kernels::sum(kernels::mul(out, r)).backward();

  std::ostringstream errors;
  int bad = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.requires_grad()) continue;
    Tensor g = x.grad();
    if (!g.defined()) return ::testing::AssertionFailure() << "input " << k << " received no gradient";
    std::vector<double> analytic = g.to_double_vector();
    double* p = x.data<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double orig = p[j];
      p[j] = orig + options.eps;
      double lp = projected(f, inputs, r);
      p[j] = orig - options.eps;
      double lm = projected(f, inputs, r);
      p[j] = orig;
      double numeric = (lp - lm) / (2 * options.eps);
      double a = analytic[static_cast<size_t>(j)];
      if (!(std::fabs(a - numeric) <= options.atol + options.rtol * std::fabs(numeric))) {
        if (bad++ < 8) errors << "\n  input " << k << " element " << j << ": backward " << a << ", numeric " << numeric;
      }
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " gradient element(s) disagree:" << errors.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << actual.str() << " vs " << expected.str();
  std::vector<double> a = actual.to_double_vector(), e = expected.to_double_vector();
  std::ostringstream errors;
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double err = std::fabs(a[i] - e[i]);
    bool nan_match = std::isnan(a[i]) && std::isnan(e[i]);
    if (!nan_match && !(err <= atol + rtol * std::fabs(e[i]))) {
      worst = std::max(worst, err);
      if (bad++ < 8) errors << "\n  [" << i << "] got " << a[i] << ", expected " << e[i];
    }
  }
  if (bad)
    return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ (atol " << atol
                                         << ", rtol " << rtol << ", worst error " << worst << "):" << errors.str();
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
