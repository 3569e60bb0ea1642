// Step counters: *step += 1 for each listed tensor, unless *found_inf != 0.
// Traffic: 8 bytes per tensor (read and write one f32); one block per launch,
// up to kMaxSteps pointers in the parameter block. Numerics: f32 counts are
// exact up to 2^24 steps (PyTorch also keeps the fused optimizers' step as f32).
#include "core/cuda_check.h"
#include "optim/cuda/step_count_cuda.h"

namespace tandem::optim {

namespace {

constexpr int kMaxSteps = 480;

struct StepList {
  float* step[kMaxSteps];
  int count;
};

__global__ void increment_steps_kernel(StepList list, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  for (int i = threadIdx.x; i < list.count; i += blockDim.x) *list.step[i] += 1.0f;
}

}  // namespace

void increment_steps_cuda(const TensorList& tensors, const float* found_inf, void* stream) {
  StepList list;
  list.count = 0;
  auto launch = [&] {
    if (list.count == 0) return;
    increment_steps_kernel<<<1, 128, 0, static_cast<cudaStream_t>(stream)>>>(list, found_inf);
    TANDEM_CUDA_CHECK_LAUNCH();
    list.count = 0;
  };
  for (const TensorListEntry& e : tensors) {
    list.step[list.count++] = e.step;  // empty tensors count their steps too, as in PyTorch
    if (list.count == kMaxSteps) launch();
  }
  launch();
}

}  // namespace tandem::optim
