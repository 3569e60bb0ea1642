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

// A cap in MB (DDPOptions' bucket_cap_mb, first_bucket_cap_mb: MiB) as bytes, rounded down;
// caps of 1e18 bytes and more mean "no cap".
size_t bucket_cap_bytes(double mb);

std::vector<BucketSpec> assign_buckets(const std::vector<ParamDesc>& params, const std::vector<int>& order,
                                       size_t first_cap_bytes, size_t cap_bytes);

// A layout as the rebuild sends it from rank 0 (PyTorch's sync_bucket_indices):
// the number of parameters in each bucket, and all buckets' parameter indices
// in order. Every rank adopts rank 0's layout rather than computing its own, so
// the layout cannot differ between ranks whatever their options or ready orders.
struct BucketIndices {
  std::vector<int64_t> counts;   // parameters per bucket
  std::vector<int64_t> indices;  // sum(counts) entries
};
BucketIndices bucket_indices(const std::vector<BucketSpec>& layout);
// The layout those indices describe over this rank's parameters. Throws Error
// naming what does not fit: an index out of range or given twice, a parameter
// left out, an empty bucket, a bucket mixing dtypes or devices.
std::vector<BucketSpec> buckets_from_indices(const std::vector<ParamDesc>& params, const BucketIndices& in);

}  // namespace tandem::ddp
