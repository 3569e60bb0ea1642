// How DDP groups parameters into buckets (PyTorch's compute_bucket_assignment_by_size).
//
// Parameters are taken in the given order (DDP passes reverse registration
// order at first, then the order gradients became ready). Each (dtype, device)
// group fills its own open bucket; a bucket closes as soon as its size reaches
// the current cap, which is `first_cap_bytes` until that group's first bucket
// closes and `cap_bytes` after that. So a parameter is never split, a bucket can pass the
// cap by its last parameter, cap 0 gives one bucket per parameter and a huge cap
// one bucket per group. Buckets are returned in the order their first
// parameter appears, which is the order they become ready in backward.
#pragma once

#include <cstddef>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace tandem::ddp {

struct ParamDesc {
  size_t bytes = 0;
  DType dtype = DType::F32;
  Device device;
};

struct BucketSpec {
  std::vector<int> params;  // indices into the parameter list, in bucket order
  size_t bytes = 0;
  DType dtype = DType::F32;
  Device device;
};

std::vector<BucketSpec> assign_buckets(const std::vector<ParamDesc>& params, const std::vector<int>& order,
                                       size_t first_cap_bytes, size_t cap_bytes);

}  // namespace tandem::ddp
