// Out-of-range indices (token ids, class labels) found on the GPU.
//
// On the CPU every op checks its indices before use and throws. A CUDA kernel
// cannot throw and the host must not wait for it, so GPU kernels that index
// with ids or labels never read out of bounds (the offending row is treated as
// zeros / ignored) and record the first bad index (op, position, value, range)
// in host-mapped memory. The ops that read indices (embedding, cross_entropy,
// accuracy_count) raise a recorded error on their next call on the host, and
// raise_pending_index_error() checks explicitly; neither synchronises, so a
// report appears once the kernel that made it has run (after any
// synchronisation, e.g. reading the loss, at the latest).
#pragma once

namespace tandem::kernels {

// Throws Error describing the first recorded out-of-range index and clears the
// record; returns normally when none is recorded or CUDA is not built in.
void raise_pending_index_error();

}  // namespace tandem::kernels
